-- Per-mall queue figures for the ops snapshot.
select m.mall_id as "mall!", m.max_running, m.min_start_gap_ms as "min_start_gap_ms!",
       count(j.job_id) filter (where j.state = 'queued') as "queued!",
       count(j.job_id) filter (where j.state = 'running') as "running!"
from mall m
left join job j on j.mall = m.mall_id and j.state in ('queued', 'running')
group by m.mall_id
order by m.mall_id
