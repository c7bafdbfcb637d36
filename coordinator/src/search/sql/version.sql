-- A search's version: the newest change number over its jobs (job_touch bumps change_seq
-- on every state, priority, lease or attempt change). Null: no such search.
-- $1 search_id.
select max(j.change_seq) as version
from search_item si
join job j on j.job_id = si.job_id
where si.search_id = $1
