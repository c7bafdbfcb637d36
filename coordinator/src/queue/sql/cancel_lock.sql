-- Step 2 of CancelSearch: lock the search's active jobs, in job_id order (two cancels that
-- share jobs take the locks in the same order and cannot deadlock).
-- NB: the lock is what makes the sharing check of step 3 sound: Search joins an active job
-- with ON CONFLICT DO UPDATE, which needs this row lock, so a join either committed before
-- this statement (step 3 sees its search_item) or waits until we commit (and then finds the
-- job cancelled and queues a new one).
-- $1 search_id.
select j.job_id
from job j
where j.job_id in (select si.job_id from search_item si where si.search_id = $1)
  and j.state in ('queued', 'running')
order by j.job_id
for update of j
