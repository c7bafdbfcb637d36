-- End runs whose lease expired without a heartbeat, or that reached their hard deadline
-- (a renewal never extends a lease past the deadline, so both show as an expired lease;
-- the deadline decides the class). Each is a failed attempt: queued again after backoff
-- while attempts are left, else dead. At most $3 jobs per call, skipping rows another
-- reaper holds. $1 backoff base ms, $2 backoff cap ms, $4 now. $8 USD per GB: the attempt
-- is charged its last heartbeat's bytes, marked estimated (a lease that expired had no
-- report; migration 0026).
-- Expired leases are only ended when $5 (the database has been reachable for a lease TTL:
-- nodes could not renew while it was away) and when no more than $7 ms passed between $6
-- (the database clock read just before this statement, on the same connection) and this
-- statement's run: a lock or a stalled database that held it back held every renewal back
-- too. (NB: not statement_timestamp(): a prepared statement waits for its locks at Bind,
-- before the Execute message that statement_timestamp() is taken from.)
with
clock as materialized (
    select coalesce($4::timestamptz, clock_timestamp()) as now,
           $5::bool and clock_timestamp() - $6::timestamptz
                        < $7::bigint * interval '1 millisecond' as leases
),
victims as (
    select j.job_id
    from job j, clock
    where j.state = 'running' and j.lease_until <= clock.now
      and (clock.leases or j.deadline_at <= clock.now)
    order by j.lease_until
    limit $3::int
    for update of j skip locked
),
reaped as (
    update job j set
        attempts = j.attempts + 1,
        state = case when j.attempts + 1 < j.max_attempts then 'queued' else 'dead' end::job_state,
        run_after = case when j.attempts + 1 < j.max_attempts
                         then clock.now + least($2::float8, $1::float8 * power(2, j.attempts))
                                          * (0.5 + random() * 0.5) * interval '1 millisecond'
                         else j.run_after end,
        finished_at = case when j.attempts + 1 < j.max_attempts then null else clock.now end,
        error_class = case when j.deadline_at <= clock.now then 'deadline'
                           else 'lease_expired' end::error_class,
        last_error = case when j.deadline_at <= clock.now
                          then 'killed at the hard deadline on node ' || j.node_id
                          else 'lease expired on node ' || j.node_id end,
        node_id = null,
        lease_until = null
    from victims v, clock
    where j.job_id = v.job_id
    returning j.job_id, j.lease_epoch, j.mall, j.state, j.error_class, j.run_started_at,
              j.last_error,
              -- the holder before this update, for the attempt record
              (select node_id from job o where o.job_id = j.job_id) as prev_node,
              j.progress_bytes, j.progress_epoch
),
-- What the lost runs are charged: the bytes their last heartbeat reported for this lease,
-- at $8 USD per GB, marked estimated; added to their malls' spend_minute bucket like
-- any spend (spend.sql's bucket rule), so the spend caps see it.
estimate as materialized (
    select r.job_id, r.lease_epoch, r.mall,
           coalesce(case when r.progress_epoch = r.lease_epoch then r.progress_bytes end, 0) as bytes
    from reaped r
),
spent as (
    select e.mall, sum(e.bytes * $8::float8 / 1e9) as added
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
                             error_class, error, bytes, cost_usd, estimated)
    select r.job_id, r.lease_epoch, r.prev_node, r.run_started_at, clock.now,
           case when r.error_class = 'deadline' then 'deadline' else 'lease_expired' end::attempt_end,
           r.error_class, r.last_error, e.bytes, e.bytes * $8::float8 / 1e9, e.bytes > 0
    from reaped r
    join estimate e on e.job_id = r.job_id
    cross join clock
),
notified as (
    select pg_notify('lps_job', m.mall)
    from (select distinct mall from reaped where state = 'queued') m
)
select r.job_id, r.state as "state: JobState", r.error_class as "error_class!: ErrorClass",
       (select count(*) from notified) as "notified!"
from reaped r
