-- Take every running job of node $1 back (its stream is gone and the grace period is
-- over), except the leases listed in $2/$3 (re-attached by a reconnect). A reclaim is not an
-- attempt. A job is poison — dead, probably what kills the nodes — only when it has ended
-- the runs of max_reclaims *different* nodes: one misbehaving node that takes jobs and
-- vanishes cannot kill them. A job goes back to the queue at once the first time a node
-- drops it; dropped again by a node that dropped it before, it waits a backoff ($7 base
-- ms, doubling per reclaim, at most $8 ms) so that other nodes take it first and one bad
-- node cannot spin it. $4 now.
-- $5 (optional) the stream session that was lost: release only while that session is
-- still the node's latest and disconnected (a node that reconnected keeps its jobs).
-- $6 USD per GB: the attempt is charged its last heartbeat's bytes, marked estimated (the
-- node cannot report what a run it lost spent; migration 0026).
with
clock as materialized (select coalesce($4::timestamptz, clock_timestamp()) as now),
-- Per running job of the node: how many other nodes' runs of it ended in a reclaim, and
-- whether this node dropped it before.
other_nodes as materialized (
    select j.job_id,
           (select count(distinct a.node_id) from job_attempt a
             where a.job_id = j.job_id and a.ended = 'reclaimed' and a.node_id <> $1::text) as n,
           exists (select 1 from job_attempt a
                    where a.job_id = j.job_id and a.ended = 'reclaimed' and a.node_id = $1::text) as again
    from job j
    where j.state = 'running' and j.node_id = $1::text
),
released as (
    update job j set
        reclaims = j.reclaims + 1,
        state = case when (select n from other_nodes o where o.job_id = j.job_id) + 1 >= j.max_reclaims
                     then 'dead' else 'queued' end::job_state,
        run_after = case when (select again from other_nodes o where o.job_id = j.job_id)
                         then clock.now + least($8::float8, $7::float8 * power(2, least(j.reclaims, 30)))
                                          * interval '1 millisecond'
                         else clock.now end,
        finished_at = case when (select n from other_nodes o where o.job_id = j.job_id) + 1 >= j.max_reclaims
                           then clock.now end,
        error_class = case when (select n from other_nodes o where o.job_id = j.job_id) + 1 >= j.max_reclaims
                           then 'poison' else j.error_class end::error_class,
        last_error = case when (select n from other_nodes o where o.job_id = j.job_id) + 1 >= j.max_reclaims
                          then 'ended the runs of ' || ((select n from other_nodes o where o.job_id = j.job_id) + 1)
                               || ' different nodes'
                          else j.last_error end,
        node_id = null,
        lease_until = null
    from clock
    where j.state = 'running' and j.node_id = $1::text
      and ($5::uuid is null or exists (
          select 1 from node_session s
          where s.node_id = $1::text and s.session_id = $5::uuid and s.disconnected_at is not null))
      and (j.job_id, j.lease_epoch) not in (
          select k.job_id, k.lease_epoch
          from unnest($2::bigint[], $3::bigint[]) as k (job_id, lease_epoch))
    returning j.job_id, j.lease_epoch, j.mall, j.state, j.run_started_at, j.progress_bytes,
              j.progress_epoch
),
-- What the lost runs are charged: the bytes their last heartbeat reported for this lease,
-- at $6 USD per GB, marked estimated; added to their malls' spend_minute bucket like
-- any spend (spend.sql's bucket rule), so the spend caps see it.
estimate as materialized (
    select r.job_id, r.lease_epoch, r.mall,
           coalesce(case when r.progress_epoch = r.lease_epoch then r.progress_bytes end, 0) as bytes
    from released r
),
spent as (
    select e.mall, sum(e.bytes * $6::float8 / 1e9) as added
    from estimate e
    where e.bytes > 0
    group by e.mall
),
bucketed as (
    insert into spend_minute as s (mall, slot, minute, cost_usd)
    select b.mall, (floor(extract(epoch from clock.now) / 60)::bigint % 60)::smallint,
           to_timestamp(floor(extract(epoch from clock.now) / 60) * 60), b.added
    from spent b, clock
    where b.added > 0
    order by b.mall
    on conflict (mall, slot) do update set
        minute = greatest(s.minute, excluded.minute),
        cost_usd = case when s.minute < excluded.minute then excluded.cost_usd
                        else s.cost_usd + excluded.cost_usd end
),
attempt as (
    insert into job_attempt (job_id, lease_epoch, node_id, started_at, ended_at, ended,
                             error_class, bytes, cost_usd, estimated)
    select r.job_id, r.lease_epoch, $1::text, r.run_started_at, clock.now, 'reclaimed',
           case when r.state = 'dead' then 'poison'::error_class end,
           e.bytes, e.bytes * $6::float8 / 1e9, e.bytes > 0
    from released r
    join estimate e on e.job_id = r.job_id
    cross join clock
),
notified as (
    select pg_notify('lps_job', m.mall)
    from (select distinct mall from released where state = 'queued') m
)
select r.job_id, r.state as "state: JobState", (select count(*) from notified) as "notified!"
from released r
