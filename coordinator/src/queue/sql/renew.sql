-- Renew the leases node $1 lists (job_id, lease_epoch pairs), never past a job's hard
-- deadline. The jobs that do not come back are no longer this node's (cancelled,
-- reclaimed, reaped, or past the deadline): the node must stop them.
-- $4 lease TTL in ms, $5 now. $6 the bytes each run reported so far (null: none reported):
-- kept as the lease's progress, what a run whose node vanishes is charged (release_node.sql,
-- reap.sql).
-- `(j.state = 'running') is true` means `j.state = 'running'`; the form makes the planner look
-- the job up by its key (see complete.sql).
with clock as materialized (select coalesce($5::timestamptz, clock_timestamp()) as now)
update job j set
    lease_until = least(clock.now + $4::bigint * interval '1 millisecond', j.deadline_at),
    progress_bytes = coalesce(i.bytes, j.progress_bytes),
    progress_epoch = case when i.bytes is null then j.progress_epoch else i.lease_epoch end
from unnest($2::bigint[], $3::bigint[], $6::bigint[]) as i (job_id, lease_epoch, bytes), clock
where j.job_id = i.job_id
  and (j.state = 'running') is true
  and j.lease_epoch = i.lease_epoch
  and j.node_id = $1::text
  and j.deadline_at > clock.now
returning j.job_id, j.lease_until as "lease_until!"
