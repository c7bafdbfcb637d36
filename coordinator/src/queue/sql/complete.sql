-- Complete a batch of leases in one statement, each fenced by (job_id, lease_epoch, running,
-- the node holding the lease).
-- A lease that is no longer current changes nothing: it is recorded in stale_report and
-- comes back with applied = false. Offers are stored for the applied ones; a not_found
-- answer is remembered in the negative cache, a found one clears it.
--
-- $1..$6 per job: job_id, lease_epoch, outcome, rounds (jsonb), bytes, cost_usd; $15 per
-- job: the reporting node (for the record). A job is listed at most once.
-- $7..$14 offers, flattened: job_id, rank, title, price, shipping_fee, url, seller, score;
-- $18..$20 the same offers' shipping_status (ShippingStatus::as_str), list_price and flags
-- (CardClass::as_str names joined by ',', '' for none).
-- $16 negative-cache TTL in ms of a not-found the mall said (no results), $24 of one the
-- judge decided; 0 means not remembered (and an older entry for the key is forgotten).
-- $21..$23 per job: the not-found's kind ('no_results', 'judged'; null for found), the
-- judge version and vocabulary revision it was judged with (null: the node did not say).
-- $17 now.
-- The attempt row is inserted without spend: spend.sql, run next in the same transaction,
-- records each report's bytes and cost on it (and on a lost lease's attempt alike).
with
clock as materialized (select coalesce($17::timestamptz, clock_timestamp()) as now),
input as (
    select * from unnest($1::bigint[], $2::bigint[], $3::job_outcome[], $4::jsonb[],
                         $5::bigint[], $6::float8[], $15::text[], $21::text[], $22::int[],
                         $23::text[])
        as i (job_id, lease_epoch, outcome, rounds, bytes, cost_usd, node_id, not_found_kind,
              judge_version, vocabulary_revision)
),
done as (
    update job j set
        state = 'done',
        change_seq = nextval('job_change_seq'),
        outcome = i.outcome,
        finished_at = clock.now,
        node_id = null,
        lease_until = null,
        rounds = i.rounds,
        bytes = j.bytes + i.bytes,
        cost_usd = j.cost_usd + i.cost_usd
    from input i, clock
    -- `(…) is true` is the same test as `j.state = 'running'`, written so that the planner
    -- looks each job up by its key: given the plain test, a generic plan whose statistics
    -- show few running jobs scans a whole partial index over running jobs instead, and
    -- under churn that index holds many dead entries (queue-bench: 100 per claim ran at
    -- ~11,000 jobs/s with the plain test, ~20,000 with this one).
    where j.job_id = i.job_id and (j.state = 'running') is true and j.lease_epoch = i.lease_epoch
      -- The lease is the node's that holds it: another node's report is stale, whatever
      -- its token (epochs are small integers anyone can guess).
      and j.node_id = i.node_id
    returning j.job_id, j.lease_epoch, j.dedupe_key, j.mall, j.outcome, i.node_id,
              j.run_started_at, i.judge_version, i.vocabulary_revision,
              coalesce(i.not_found_kind, 'judged') as not_found_kind,
              case when i.not_found_kind = 'no_results' then $16::bigint
                   else $24::bigint end as negative_ttl_ms
),
attempt as (
    insert into job_attempt (job_id, lease_epoch, node_id, started_at, ended_at, ended)
    select d.job_id, d.lease_epoch, d.node_id, d.run_started_at, clock.now, 'done'
    from done d, clock
),
offers as (
    insert into offer (job_id, rank, mall, title, price, shipping_fee, url, seller, match_score,
                       shipping_status, list_price, flags)
    select o.job_id, o.rank, d.mall, o.title, o.price, o.shipping_fee, o.url, o.seller, o.score,
           o.shipping_status, o.list_price, string_to_array(o.flags, ',')
    from unnest($7::bigint[], $8::smallint[], $9::text[], $10::bigint[], $11::bigint[],
                $12::text[], $13::text[], $14::real[], $18::text[], $19::bigint[], $20::text[])
        as o (job_id, rank, title, price, shipping_fee, url, seller, score,
              shipping_status, list_price, flags)
    join done d using (job_id)
),
remember_not_found as (
    insert into negative_cache (dedupe_key, job_id, created_at, expires_at, kind,
                                judge_version, vocabulary_revision)
    select d.dedupe_key, d.job_id, clock.now,
           clock.now + d.negative_ttl_ms * interval '1 millisecond', d.not_found_kind,
           d.judge_version, d.vocabulary_revision
    from done d, clock
    where d.outcome = 'not_found' and d.negative_ttl_ms > 0
    on conflict (dedupe_key) do update
        set job_id = excluded.job_id, created_at = excluded.created_at,
            expires_at = excluded.expires_at, kind = excluded.kind,
            judge_version = excluded.judge_version,
            vocabulary_revision = excluded.vocabulary_revision
),
forget_not_found as (
    delete from negative_cache n using done d
    where n.dedupe_key = d.dedupe_key
      and (d.outcome = 'found' or d.negative_ttl_ms <= 0)
),
stale as (
    insert into stale_report (job_id, lease_epoch, node_id, kind, received_at)
    select i.job_id, i.lease_epoch, i.node_id, 'result', clock.now
    from input i, clock
    where i.job_id not in (select job_id from done)
      and exists (select 1 from job j where j.job_id = i.job_id)
)
select i.job_id as "job_id!", d.job_id is not null as "applied!"
from input i left join done d using (job_id)
