-- At most $1 schedules whose current run's search is final (no queued or running job) and
-- not yet evaluated; a run whose search is gone (deleted by hand) counts as final.
select s.schedule_id, s.run_number, s.last_search_id
from schedule s
where s.evaluated_run < s.run_number
  and (s.last_search_id is null or not exists (
        select 1 from search_item si join job j on j.job_id = si.job_id
        where si.search_id = s.last_search_id and j.state in ('queued', 'running')))
order by s.schedule_id
limit $1
