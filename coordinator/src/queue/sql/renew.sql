-- Renew the leases node $1 lists (job_id, lease_epoch pairs), never past a job's hard
-- deadline. The jobs that do not come back are no longer this node's (cancelled,
-- reclaimed, reaped, or past the deadline): the node must stop them.
-- $4 lease TTL in ms, $5 now.
-- `(j.state = 'running') is true` means `j.state = 'running'`; the form makes the planner look
-- the job up by its key (see complete.sql).
with clock as materialized (select coalesce($5::timestamptz, clock_timestamp()) as now)
update job j set
    lease_until = least(clock.now + $4::bigint * interval '1 millisecond', j.deadline_at)
from unnest($2::bigint[], $3::bigint[]) as i (job_id, lease_epoch), clock
where j.job_id = i.job_id
  and (j.state = 'running') is true
  and j.lease_epoch = i.lease_epoch
  and j.node_id = $1::text
  and j.deadline_at > clock.now
returning j.job_id, j.lease_until as "lease_until!"
