-- Take every running job of node $1 back (its stream is gone and the grace period is
-- over), except the leases listed in $2/$3 (re-attached by a reconnect). A reclaim is not an
-- attempt: the job is queued again at once. A job that has lost its node max_reclaims
-- times goes dead as poison: it is probably what kills the nodes. $4 now.
-- $5 (optional) the stream session that was lost: release only while that session is
-- still the node's latest and disconnected (a node that reconnected keeps its jobs).
with
clock as materialized (select coalesce($4::timestamptz, clock_timestamp()) as now),
released as (
    update job j set
        reclaims = j.reclaims + 1,
        state = case when j.reclaims + 1 >= j.max_reclaims then 'dead' else 'queued' end::job_state,
        run_after = clock.now,
        finished_at = case when j.reclaims + 1 >= j.max_reclaims then clock.now end,
        error_class = case when j.reclaims + 1 >= j.max_reclaims
                           then 'poison' else j.error_class end::error_class,
        last_error = case when j.reclaims + 1 >= j.max_reclaims
                          then 'lost its node ' || (j.reclaims + 1) || ' times'
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
    returning j.job_id, j.lease_epoch, j.mall, j.state, j.run_started_at
),
attempt as (
    insert into job_attempt (job_id, lease_epoch, node_id, started_at, ended_at, ended,
                             error_class)
    select r.job_id, r.lease_epoch, $1::text, r.run_started_at, clock.now, 'reclaimed',
           case when r.state = 'dead' then 'poison'::error_class end
    from released r, clock
),
notified as (
    select pg_notify('lps_job', m.mall)
    from (select distinct mall from released where state = 'queued') m
)
select r.job_id, r.state as "state: JobState", (select count(*) from notified) as "notified!"
from released r
