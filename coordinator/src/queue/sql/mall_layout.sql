-- Per mall, over the attempts that ended in the window ($2 ms up to $1 now): how many the
-- node finished with a verdict on the page (a result or a failure; not the runs that
-- expired, hit the deadline, were taken back, handed back or cancelled), and how many of
-- those failed as `layout`. Malls without such an attempt in the window have no row.
--
-- Bounded by the window: job_attempt_ended_at finds its attempts, and each one's mall is
-- looked up by job_pkey. NB: the mall is a scalar subquery on purpose: written as a join,
-- a generic plan (plan_cache_mode = force_generic_plan) cannot tell how few attempts the
-- window holds and hashes the whole job table instead (~150 ms at 600,000 jobs, growing
-- with the table; this form reads ~30,000 attempts of one window in ~60 ms and does not
-- grow with the job table).
with
clock as materialized (select coalesce($1::timestamptz, clock_timestamp()) as now),
recent as (
    select (select j.mall from job j where j.job_id = a.job_id) as mall, a.error_class
    from clock, job_attempt a
    where a.ended_at > clock.now - $2::bigint * interval '1 millisecond'
      and a.ended_at <= clock.now
      and a.ended in ('done', 'failed')
)
select mall as "mall!",
       count(*) as "finished!",
       count(*) filter (where error_class = 'layout') as "layout!"
from recent
group by mall
order by mall
