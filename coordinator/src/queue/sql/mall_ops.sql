-- Per-mall queue figures for the ops snapshot, with each mall's spend over the rolling hour
-- up to $1 now (spend_minute, the figure its spend cap compares). $1 now.
select m.mall_id as "mall!", m.max_running, m.min_start_gap_ms as "min_start_gap_ms!",
       m.spend_cap_hourly_usd,
       coalesce((select sum(s.cost_usd) from spend_minute s
                 where s.mall = m.mall_id
                   and s.minute > coalesce($1::timestamptz, clock_timestamp()) - interval '1 hour'),
                0)::float8 as "spend_usd_last_hour!",
       count(j.job_id) filter (where j.state = 'queued') as "queued!",
       count(j.job_id) filter (where j.state = 'running') as "running!"
from mall m
left join job j on j.mall = m.mall_id and j.state in ('queued', 'running')
group by m.mall_id
order by m.mall_id
