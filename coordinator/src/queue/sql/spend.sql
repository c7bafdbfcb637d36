-- Record what runs spent, the one statement that writes spend. For each reported lease
-- ($1 job_id, $2 lease_epoch, $3 the reporting node, $4 bytes, $5 cost_usd) whose attempt has
-- ended and was that node's — ended by the report's own transition just before, or already
-- (cancelled, reaped, reclaimed: a report for a lost lease) — the attempt row takes the
-- reported bytes and cost where they are larger than what it holds. So a resent report adds
-- nothing, and a report never lowers a figure. What the cost grew by is added to the
-- attempt's mall in spend_minute, in the bucket of $6 now (the claim statements' spend caps
-- read it). Leases without such an attempt (still running, another node's, unknown) are left
-- out of the answer. The job row is never changed. A lease is listed at most once.
--
-- Returns each matched attempt with the cost it added (0: nothing new).
with
clock as materialized (
    select c.now,
           to_timestamp(floor(extract(epoch from c.now) / 60) * 60) as minute,
           (floor(extract(epoch from c.now) / 60)::bigint % 60)::smallint as slot
    from (select coalesce($6::timestamptz, clock_timestamp()) as now) c
),
input as (
    select * from unnest($1::bigint[], $2::bigint[], $3::text[], $4::bigint[], $5::float8[])
        as i (job_id, lease_epoch, node_id, bytes, cost_usd)
),
-- The attempts as they stand, locked: two reports of one attempt recorded at once (a resend
-- on another replica) add its cost once.
prev as materialized (
    select a.job_id, a.lease_epoch, a.bytes, a.cost_usd,
           i.bytes as reported_bytes, i.cost_usd as reported_cost
    from input i
    join job_attempt a on a.job_id = i.job_id and a.lease_epoch = i.lease_epoch
    where a.node_id = i.node_id
    order by a.job_id, a.lease_epoch
    for update of a
),
recorded as (
    update job_attempt a set
        bytes = greatest(p.bytes, p.reported_bytes),
        cost_usd = greatest(p.cost_usd, p.reported_cost),
        -- A report that covers an estimate (release_node.sql, reap.sql) replaces it.
        estimated = a.estimated and p.reported_bytes < p.bytes
    from prev p
    where a.job_id = p.job_id and a.lease_epoch = p.lease_epoch
      and (p.reported_bytes > p.bytes or p.reported_cost > p.cost_usd)
    returning a.job_id, a.lease_epoch, greatest(p.reported_cost - p.cost_usd, 0) as added
),
by_mall as (
    select j.mall, sum(r.added) as added
    from recorded r
    join job j on j.job_id = r.job_id
    where r.added > 0
    group by j.mall
),
bucketed as (
    insert into spend_minute as s (mall, slot, minute, cost_usd)
    select b.mall, clock.slot, clock.minute, b.added
    from by_mall b, clock
    order by b.mall
    on conflict (mall, slot) do update set
        -- The slot's bucket is this minute's (add), an hour old or older (start over), or —
        -- only with a clock that went back — newer (keep it, counting this spend there).
        minute = greatest(s.minute, excluded.minute),
        cost_usd = case when s.minute < excluded.minute then excluded.cost_usd
                        else s.cost_usd + excluded.cost_usd end
)
select p.job_id as "job_id!", p.lease_epoch as "lease_epoch!",
       coalesce(r.added, 0)::float8 as "added_usd!"
from prev p
left join recorded r on r.job_id = p.job_id and r.lease_epoch = p.lease_epoch
