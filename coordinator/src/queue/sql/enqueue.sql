-- Accept a search in one round trip: the request, one job per new (mall, product) key,
-- priority promotion of active jobs with the same key, answers from the caches, the items,
-- and a NOTIFY per mall that got new work. Nothing is written when any mall is unknown or
-- disabled, or when the client used the idempotency key before (the caller then reads that
-- search, or refuses the request when its digest differs).
--
-- $1 priority, $2 max_age_ms (null: no fresh-result answers), $3 idempotency key,
-- $4 caller, $5 traceparent, $6 tracestate, $7..$11 items (product_index, mall,
-- product_code, product_name, product_key: the client's identity of the product),
-- $12 run_timeout_ms, $13 max_attempts,
-- $14 now (null: the database clock), $15 client, $16 request digest (SHA-256 hex),
-- $17 destinations to notify when final, $18 whether each product's final status is an
-- event too, $19..$22 the items' hints (hints key, brand, model code, GTIN; null: none),
-- $23 the judge version and $24 the items' vocabulary revisions the coordinator runs now
-- (null: not known, as in tests): a negative-cache entry answers only when it was written
-- under the same (migration 0024), $25 the items' crawl keys ('name:<folded name>'),
-- $26 the schedule whose run this is (null: none).
--
-- A job is a crawl (migration 0025): its dedupe key is '<mall>|<crawl key>', with
-- '|<hints key>' after it when the product has hints. The caller's code is no part of it:
-- two clients asking the same name with the same hints share one job and its cached
-- answers, and the same code with another name is another job. What the caller asked
-- for is kept per product of the search (search_product): its identity, code and name.
--
-- A search answered from the caches alone is final as it is stored: its delivery events
-- are inserted here (a later job change cannot fire the trigger of migration 0018 for it).
with
clock as materialized (select coalesce($14::timestamptz, clock_timestamp()) as now),
input as (
    select (i.ord - 1)::int as item_no, i.product_index, i.mall, i.product_code,
           i.product_name, i.product_key, i.crawl_key, i.brand, i.model_code, i.gtin,
           i.vocabulary_revision,
           i.mall || '|' || i.crawl_key || coalesce('|' || i.hints_key, '') as dedupe_key
    from unnest($7::int[], $8::text[], $9::text[], $10::text[], $11::text[], $19::text[],
                $20::text[], $21::text[], $22::text[], $24::text[], $25::text[])
        with ordinality
        as i (product_index, mall, product_code, product_name, product_key, hints_key, brand,
              model_code, gtin, vocabulary_revision, crawl_key, ord)
),
replay as (
    select search_id, request_digest from search_request
    where client = $15::text and idempotency_key = $3::text
),
unknown as (
    select distinct input.mall
    from input left join mall m on m.mall_id = input.mall and m.enabled
    where m.mall_id is null
),
go as (
    select not exists (select 1 from replay) and not exists (select 1 from unknown) as ok
),
req as (
    insert into search_request (priority, max_age_ms, idempotency_key, caller, traceparent,
                                created_at, client, request_digest, destinations,
                                notify_products, schedule_id)
    select $1::smallint, $2::bigint, $3::text, $4::text, $5::text, clock.now, $15::text,
           $16::text, $17::text[], $18::boolean, $26::bigint
    from go, clock where go.ok
    returning search_id
),
products as (
    insert into search_product (search_id, product_index, product_key, product_code,
                                product_name, product_brand, product_model_code,
                                product_gtin)
    select distinct on (input.product_index)
           req.search_id, input.product_index, input.product_key, input.product_code,
           input.product_name, input.brand, input.model_code, input.gtin
    from req cross join input
    order by input.product_index, input.item_no
    returning product_index
),
cached as (
    select input.item_no,
        (select j.job_id from job j
          where j.dedupe_key = input.dedupe_key and j.outcome = 'found'
            and j.finished_at >= clock.now - $2::bigint * interval '1 millisecond'
          order by j.finished_at desc limit 1) as fresh_job,
        (select n.job_id from negative_cache n
          where n.dedupe_key = input.dedupe_key and n.expires_at > clock.now
            and n.judge_version is not distinct from $23::int
            and n.vocabulary_revision is not distinct from input.vocabulary_revision)
            as negative_job
    from input, clock
),
need as (
    select input.*
    from input join cached using (item_no)
    where cached.fresh_job is null and cached.negative_job is null
),
upserted as (
    insert into job (dedupe_key, mall, product_code, product_name, product_key, priority,
                     run_after, created_at, run_timeout_ms, max_attempts, traceparent, tracestate,
                     product_brand, product_model_code, product_gtin)
    select distinct on (need.dedupe_key)
           need.dedupe_key, need.mall, null, need.product_name, need.crawl_key,
           $1::smallint, clock.now, clock.now, $12::int, $13::smallint, $5::text, $6::text,
           need.brand, need.model_code, need.gtin
    from need, go, clock
    where go.ok
    order by need.dedupe_key, need.item_no
    -- NB: DO UPDATE (not DO NOTHING) so the active job's id is returned even when a
    -- concurrent statement inserted it after this statement's snapshot was taken.
    on conflict (dedupe_key) where state in ('queued', 'running')
    do update set priority = least(job.priority, excluded.priority)
    returning job.job_id, job.dedupe_key, job.mall, (xmax = 0) as inserted
),
items as (
    insert into search_item (search_id, item_no, product_index, mall, job_id, disposition)
    select req.search_id, input.item_no, input.product_index, input.mall,
           coalesce(c.fresh_job, c.negative_job, u.job_id),
           case
               when c.fresh_job is not null then 'cached_result'
               when c.negative_job is not null then 'cached_not_found'
               when u.inserted and row_number() over (
                   partition by input.dedupe_key order by input.item_no) = 1 then 'queued'
               else 'joined'
           end::item_disposition
    from req
    cross join input
    join cached c using (item_no)
    left join upserted u using (dedupe_key)
    returning item_no, product_index, job_id, disposition
),
-- Final at once: the search when every item is a cached answer, a product (when asked)
-- when every item of it is.
-- NB: a left join: this statement's new jobs are not visible to it, and an item of one
-- must still count (as not cached).
finals as (
    select null::int as product_index, max(j.change_seq) as version
    from items i left join job j on j.job_id = i.job_id
    having bool_and(i.disposition in ('cached_result', 'cached_not_found'))
    union all
    select i.product_index, max(j.change_seq)
    from items i left join job j on j.job_id = i.job_id
    where $18::boolean
    group by i.product_index
    having bool_and(i.disposition in ('cached_result', 'cached_not_found'))
),
events as (
    insert into delivery (search_id, product_index, search_version, destination,
                          next_attempt_at)
    select req.search_id, f.product_index, f.version, d.destination, clock.now
    from req, clock, finals f, unnest($17::text[]) as d (destination)
    on conflict do nothing
    returning delivery_id
),
delivery_notified as (
    select pg_notify('lps_delivery', '') from (select 1 from events limit 1) e
),
notified as (
    select pg_notify('lps_job', m.mall)
    from (select distinct mall from upserted where inserted) m
)
select
    (select search_id from req) as "search_id?",
    (select search_id from replay) as "replay_of?",
    (select request_digest from replay) as "replay_digest?",
    (select array_agg(mall order by mall) from unknown) as "unknown_malls?: Vec<String>",
    coalesce((select array_agg(job_id order by item_no) from items), '{}') as "job_ids!: Vec<i64>",
    coalesce((select array_agg(disposition::text order by item_no) from items), '{}') as "dispositions!: Vec<String>",
    (select count(*) from notified) as "notified!",
    (select count(*) from events) as "events!",
    (select count(*) from delivery_notified) as "delivery_notified!"
