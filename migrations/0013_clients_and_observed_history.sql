-- LPS schema, part 13: a search belongs to the client that made it, and a product's price
-- history entry is written in the transaction that gave the product its last result.
--
-- Searches: `client` is the name of the token the search was made with (LPS_CLIENT_TOKENS
-- `name=token`; an unnamed token's name is derived from it). An idempotency key is unique
-- per client, not across the deployment, and `request_digest` (SHA-256 of the validated
-- request) tells a retry from a different request reusing the key. Searches made before
-- this migration have client '' (only an admin sees them) and no digest.
--
-- Price history: before, the reaper swept finished jobs about once a second and wrote an
-- entry per (search, product) whose malls were all final, stamped with the sweep's time.
-- Now triggers on `job` write it in the statement that finished the product's last job
-- (see record_price_history() below), so the entry commits with the final status.
-- Each entry says when its prices were observed, which malls answered, and whether every
-- mall of the product answered (`complete`); a product answered from stored results alone
-- writes none.

alter table search_request add column client text not null default '';
alter table search_request alter column client drop default;
alter table search_request add column request_digest text
    check (request_digest ~ '^[0-9a-f]{64}$');
alter table search_request drop constraint search_request_idempotency_key_key;
create unique index search_request_client_key
    on search_request (client, idempotency_key) where idempotency_key is not null;
-- The items of one product of a search (price history, written as its last job finishes).
create index search_item_product on search_item (search_id, product_index);
-- ListSearches: a client's searches, newest first.
create index search_request_client_newest on search_request (client, search_id desc);

alter table price_history add column observed_at timestamptz;
alter table price_history add column covered_malls text[] not null default '{}';
alter table price_history add column complete boolean not null default false;
-- Entries of the sweep: observed no later than recorded; covered and complete as the
-- search's items say now.
update price_history h set
    observed_at = h.recorded_at,
    covered_malls = coalesce((
        select array_agg(distinct si.mall order by si.mall)
        from search_item si join job j on j.job_id = si.job_id
        where si.search_id = h.search_id and j.product_key = h.product_key
          and j.state = 'done'), '{}'),
    complete = h.search_id is not null and not exists (
        select 1
        from search_item si join job j on j.job_id = si.job_id
        where si.search_id = h.search_id and j.product_key = h.product_key
          and j.state <> 'done');
alter table price_history alter column observed_at set not null;
drop index price_history_product;
-- GetPriceHistory: a product's entries newest first, paged by (observed_at, id).
create index price_history_product on price_history (product_key, observed_at desc, id desc);

-- Writes the price-history entries of the (search, product) groups whose last job this
-- statement finished. A group gets an entry when every item of it is final and at least
-- one of its malls was crawled for it and answered (an item queued or joined, its job
-- done): answers from stored results alone add nothing. The entry holds the lowest
-- offer with known shipping per mall that answered found (each with when its job finished
-- and whether it came from a stored result), the lowest effective price over them, the
-- malls that answered at all (found or not found), `complete` (every mall answered; false
-- when one died or the search was cancelled), and `observed_at` (the newest finish among
-- the malls crawled for the search). No offer with known shipping: no entry.
--
-- NB: two transactions finishing the last two jobs of one product at once would each see
-- the other's job still running and neither would write. So the statement first takes a
-- transaction advisory lock per (search, product) group it touches, one at a time in key
-- order (two such statements cannot deadlock), and the insert after it runs on a fresh
-- snapshot that sees the job another transaction committed while this one waited. Only
-- finishes of one product of one search wait for each other; a large search's other
-- products do not (a lock on the search row would serialise all of them).
create function record_price_history() returns trigger language plpgsql as $$
declare
    marked text := current_setting('lps.finished_jobs', true);
    finished_ids bigint[];
    group_key bigint;
begin
    if marked is null or marked = '' then
        return null;
    end if;
    perform set_config('lps.finished_jobs', '', true);
    finished_ids := string_to_array(rtrim(marked, ','), ',')::bigint[];
    for group_key in
        select distinct hashtextextended(si.search_id::text || '|' || j.product_key, 13)
        from job j
        join search_item si on si.job_id = j.job_id
        where j.job_id = any(finished_ids)
        order by 1
    loop
        perform pg_advisory_xact_lock(group_key);
    end loop;

    with
    finished as (
        select unnest(finished_ids) as job_id
    ),
    -- A product of a search: its items are found by (search_id, product_index) (index
    -- search_item_product), never by scanning the search's other products.
    groups as (
        select distinct si.search_id, si.product_index
        from finished f
        join search_item si on si.job_id = f.job_id
    ),
    members as (
        select g.search_id, g.product_index, si.mall, j.job_id, j.state, j.outcome,
               j.finished_at, j.product_key, si.disposition in ('queued', 'joined') as crawled
        from groups g
        join search_item si on si.search_id = g.search_id and si.product_index = g.product_index
        join job j on j.job_id = si.job_id
    ),
    summary as (
        select m.search_id, m.product_index, min(m.product_key) as product_key,
               bool_and(m.state in ('done', 'dead', 'cancelled')) as final,
               bool_and(m.state = 'done') as complete,
               bool_or(m.crawled and m.state = 'done') as crawled_any,
               max(m.finished_at) filter (where m.crawled and m.state = 'done') as observed_at,
               coalesce(array_agg(distinct m.mall order by m.mall)
                            filter (where m.state = 'done'), '{}') as covered_malls
        from members m
        group by m.search_id, m.product_index
    ),
    best as (
        select s.search_id, s.product_index, m.mall, o.price, o.shipping_fee,
               o.shipping_status, o.effective_price, o.url, o.title, m.finished_at,
               not m.crawled as cached,
               row_number() over (partition by s.search_id, s.product_index, m.mall
                                  order by o.effective_price, o.shipping_fee, o.rank) as rn
        from summary s
        join members m on m.search_id = s.search_id and m.product_index = s.product_index
        join offer o on o.job_id = m.job_id and o.shipping_status <> 'unknown'
        where s.final and s.crawled_any and m.state = 'done' and m.outcome = 'found'
    ),
    entries as (
        select s.product_index, s.product_key, s.search_id, s.observed_at,
               min(b.effective_price) as lowest_effective_price,
               (array_agg(b.mall order by b.effective_price, b.shipping_fee, b.mall))[1]
                   as lowest_mall,
               jsonb_agg(jsonb_build_object(
                   'mall', b.mall, 'price', b.price, 'shipping_fee', b.shipping_fee,
                   'shipping', b.shipping_status, 'effective_price', b.effective_price,
                   'url', b.url, 'title', b.title, 'observed_at', b.finished_at,
                   'cached', b.cached)
                   order by b.effective_price, b.mall) as malls,
               s.covered_malls, s.complete
        from summary s
        join best b on b.search_id = s.search_id and b.product_index = s.product_index
                   and b.rn = 1
        group by s.search_id, s.product_index, s.product_key, s.observed_at,
                 s.covered_malls, s.complete
    )
    insert into price_history (product_key, search_id, recorded_at, observed_at,
                               lowest_effective_price, lowest_mall, malls, covered_malls,
                               complete)
    -- NB: a request that lists one product twice has one entry for it (the unique index;
    -- its two products share the jobs, so their entries are the same).
    select distinct on (e.search_id, e.product_key)
           e.product_key, e.search_id, clock_timestamp(), e.observed_at,
           e.lowest_effective_price, e.lowest_mall, e.malls, e.covered_malls, e.complete
    from entries e
    order by e.search_id, e.product_key, e.product_index
    -- A dead job retried to the end turns an incomplete entry into the complete one.
    on conflict (search_id, product_key) where search_id is not null
    do update set recorded_at = excluded.recorded_at,
                  observed_at = excluded.observed_at,
                  lowest_effective_price = excluded.lowest_effective_price,
                  lowest_mall = excluded.lowest_mall,
                  malls = excluded.malls,
                  covered_malls = excluded.covered_malls,
                  complete = excluded.complete
    where not price_history.complete;
    return null;
end $$;

-- The jobs a statement finished, marked row by row in a transaction-local setting by a
-- row trigger that fires only on a finishing transition (its WHEN clause is checked
-- without calling a function), read once per statement by record_price_history().
-- NB: not a statement trigger with transition tables: those copy every updated row of
-- every statement on `job` — each claim, renewal and completion — and cost the queue about
-- a third of its throughput (BENCHMARKS.md, "Price history with the last result").
create function job_mark_finished() returns trigger language plpgsql as $$
begin
    perform set_config('lps.finished_jobs',
                       coalesce(current_setting('lps.finished_jobs', true), '') || new.job_id || ',',
                       true);
    return null;
end $$;

create trigger job_mark_finished after update of state on job
    for each row
    when (new.state in ('done', 'dead', 'cancelled')
          and old.state not in ('done', 'dead', 'cancelled'))
    execute function job_mark_finished();

-- NB: after-row triggers of a statement fire before its after-statement triggers, so the
-- marks of this statement are all set when this runs.
create trigger job_price_history after update on job
    for each statement execute function record_price_history();

-- The ops snapshot's per-client figures: searches of the last day.
create index search_request_created on search_request (created_at);
