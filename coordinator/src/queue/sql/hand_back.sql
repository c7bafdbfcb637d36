-- A node hands back lease ($1, $2) it will not finish (it is draining, or no proxy port was
-- free for it): the job is queued again, no attempt and no reclaim counted, to run at $5 (the
-- ledger's next free port; null: at once), never later than 5 minutes from now. $3 node_id,
-- $4 now. What the run spent is
-- recorded on the handed-back attempt by spend.sql next.
-- `(j.state = 'running') is true` means `j.state = 'running'`; the form makes the planner look
-- the job up by its key (see complete.sql).
with
clock as materialized (select coalesce($4::timestamptz, clock_timestamp()) as now),
back as (
    update job j set
        state = 'queued', node_id = null, lease_until = null,
        run_after = greatest(clock.now,
                             least(coalesce($5::timestamptz, clock.now), clock.now + interval '5 minutes'))
    from clock
    where j.job_id = $1::bigint and (j.state = 'running') is true and j.lease_epoch = $2::bigint
      and j.node_id = $3::text
    returning j.job_id, j.lease_epoch, j.mall, j.run_started_at
),
attempt as (
    insert into job_attempt (job_id, lease_epoch, node_id, started_at, ended_at, ended)
    select b.job_id, b.lease_epoch, $3::text, b.run_started_at, clock.now, 'handed_back'
    from back b, clock
),
notified as (select pg_notify('lps_job', b.mall) from back b),
stale as (
    insert into stale_report (job_id, lease_epoch, node_id, kind, received_at)
    select $1::bigint, $2::bigint, $3::text, 'release', clock.now
    from clock
    where not exists (select 1 from back)
      and exists (select 1 from job j where j.job_id = $1::bigint)
)
select b.job_id, (select count(*) from notified) as "notified!" from back b
