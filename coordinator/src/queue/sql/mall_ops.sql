-- Per-mall queue figures for the ops snapshot, with each mall's spend over the rolling hour
-- up to $1 now (spend_minute, the figure its spend cap compares). $1 now.
-- NB: each count is a scalar subquery on purpose: a mall's queued jobs are the head of
-- job_claim_order, its running ones a filter over job_running_lease (jobs in hand); a join
-- of `mall` with `job` may be planned (generic plans above all) as a hash over the whole
-- table, whose cost grows with history.
select m.mall_id as "mall!", m.max_running, m.min_start_gap_ms as "min_start_gap_ms!",
       m.spend_cap_hourly_usd,
       coalesce((select sum(s.cost_usd) from spend_minute s
                 where s.mall = m.mall_id
                   and s.minute > coalesce($1::timestamptz, clock_timestamp()) - interval '1 hour'),
                0)::float8 as "spend_usd_last_hour!",
       (select count(*) from job j where j.mall = m.mall_id and j.state = 'queued') as "queued!",
       (select count(*) from job j where j.mall = m.mall_id and j.state = 'running') as "running!"
from mall m
order by m.mall_id
