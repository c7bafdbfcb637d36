-- Cancel jobs $1: queued ones in place, running ones too (their lease ends now, so the
-- node's late report is stale). Returns the running ones so their nodes can be told.
-- $2 now.
with
clock as materialized (select coalesce($2::timestamptz, clock_timestamp()) as now),
cancelled as (
    update job j set state = 'cancelled', finished_at = clock.now, node_id = null, lease_until = null
    from clock
    where j.job_id = any($1::bigint[]) and j.state in ('queued', 'running')
    returning j.job_id, j.lease_epoch, j.run_started_at,
              (select o.state from job o where o.job_id = j.job_id) as prev_state,
              (select o.node_id from job o where o.job_id = j.job_id) as prev_node
),
attempt as (
    insert into job_attempt (job_id, lease_epoch, node_id, started_at, ended_at, ended)
    select c.job_id, c.lease_epoch, c.prev_node, c.run_started_at, clock.now, 'cancelled'
    from cancelled c, clock
    where c.prev_state = 'running'
)
select c.job_id as "job_id!", c.lease_epoch as "lease_epoch!",
       c.prev_state as "prev_state!: JobState", c.prev_node
from cancelled c
