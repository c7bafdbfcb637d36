-- Per client, its searches of the last 24 hours (index search_request_created): how many
-- were made in the last hour and how many still have an active (queued or running) job.
-- Busiest first. $1 now (null: the database clock).
with clock as materialized (select coalesce($1::timestamptz, clock_timestamp()) as now)
select r.client,
       count(*) filter (where r.created_at >= clock.now - interval '1 hour') as "searches_last_hour!",
       count(*) filter (where exists (
           select 1 from search_item si join job j on j.job_id = si.job_id
           where si.search_id = r.search_id and j.state in ('queued', 'running'))
       ) as "active_searches!"
from search_request r, clock
where r.created_at >= clock.now - interval '24 hours'
group by r.client
order by 3 desc, 2 desc, r.client
