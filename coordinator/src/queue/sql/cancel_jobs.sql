-- Step 3 of CancelSearch: cancel the locked jobs ($2) that no other active search shares.
-- A search sharing an active job is itself not final, so "active" here only means "not
-- cancelled". Queued jobs are cancelled in place; running ones lose their lease now (the
-- node's late report is stale) and their run is recorded as cancelled. Returns the
-- cancelled jobs with their state and node before the cancel.
-- $1 search_id, $2 locked job ids, $3 now (null: the database clock).
with
clock as materialized (select coalesce($3::timestamptz, clock_timestamp()) as now),
target as materialized (
    select j.job_id, j.state as prev_state, j.node_id as prev_node, j.lease_epoch,
           j.run_started_at
    from job j
    where j.job_id = any($2::bigint[])
      and j.state in ('queued', 'running')
      and not exists (
          select 1
          from search_item si
          join search_request r on r.search_id = si.search_id
          where si.job_id = j.job_id and si.search_id <> $1 and r.cancelled_at is null)
),
cancelled as (
    update job j set state = 'cancelled', finished_at = clock.now, node_id = null, lease_until = null
    from target t, clock
    where j.job_id = t.job_id
    returning j.job_id
),
attempt as (
    insert into job_attempt (job_id, lease_epoch, node_id, started_at, ended_at, ended)
    select t.job_id, t.lease_epoch, t.prev_node, t.run_started_at, clock.now, 'cancelled'
    from target t join cancelled c on c.job_id = t.job_id, clock
    where t.prev_state = 'running'
)
select t.job_id as "job_id!", t.lease_epoch as "lease_epoch!",
       t.prev_state as "prev_state!: JobState", t.prev_node
from target t
join cancelled c on c.job_id = t.job_id
order by t.job_id
