-- Of the leases a reconnecting node $1 lists ($2 job ids, $3 epochs), the ones it still
-- holds, each renewed for $4 ms (never past the job's hard deadline): time the node spent
-- away does not count against a lease it still holds. $5 now.
with clock as materialized (select coalesce($5::timestamptz, clock_timestamp()) as now)
update job j set
    lease_until = greatest(j.lease_until,
                           least(clock.now + $4::bigint * interval '1 millisecond', j.deadline_at))
from unnest($2::bigint[], $3::bigint[]) as l (job_id, lease_epoch), clock
where j.job_id = l.job_id
  and (j.state = 'running') is true
  and j.lease_epoch = l.lease_epoch
  and j.node_id = $1::text
returning j.job_id, j.lease_epoch
