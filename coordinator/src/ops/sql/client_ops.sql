-- Per client, its searches of the last 24 hours (index search_request_created): how many
-- were made in the last hour, how many still have an active (queued or running) job, the
-- distinct jobs they wait for by state, and what the attempts of the jobs they queued
-- (disposition 'queued': the client's own crawls, not the ones it joined) cost in the last
-- hour (index job_attempt_ended_at is not needed: the attempts are found by job). Busiest
-- first. $1 now (null: the database clock).
with
clock as materialized (select coalesce($1::timestamptz, clock_timestamp()) as now),
recent as materialized (
    select r.search_id, r.client, r.created_at
    from search_request r, clock
    where r.created_at >= clock.now - interval '24 hours'
),
waiting as (
    select distinct r.client, j.job_id, j.state
    from recent r
    join search_item si on si.search_id = r.search_id
    join job j on j.job_id = si.job_id
    where j.state in ('queued', 'running')
),
spent as (
    select q.client, sum(a.cost_usd) as cost
    from (select distinct r.client, si.job_id
          from recent r
          join search_item si on si.search_id = r.search_id
          where si.disposition = 'queued') q
    join job_attempt a on a.job_id = q.job_id, clock
    where a.ended_at >= clock.now - interval '1 hour'
    group by q.client
)
select r.client,
       count(*) filter (where r.created_at >= clock.now - interval '1 hour') as "searches_last_hour!",
       count(*) filter (where exists (
           select 1 from search_item si join job j on j.job_id = si.job_id
           where si.search_id = r.search_id and j.state in ('queued', 'running'))
       ) as "active_searches!",
       (select count(*) from waiting w where w.client = r.client and w.state = 'queued')
           as "queued_jobs!",
       (select count(*) from waiting w where w.client = r.client and w.state = 'running')
           as "running_jobs!",
       coalesce((select s.cost from spent s where s.client = r.client), 0)::float8
           as "spend_usd_last_hour!"
from recent r, clock
group by r.client, clock.now
order by 3 desc, 2 desc, r.client
