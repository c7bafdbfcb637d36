-- The queue's part of the ops snapshot, in one round trip. $1 now.
with clock as materialized (select coalesce($1::timestamptz, clock_timestamp()) as now)
select
    (select count(*) from job where state = 'queued') as "queued!",
    (select count(*) from job where state = 'running') as "running!",
    (select count(*) from job where state = 'done') as "done!",
    (select count(*) from job where state = 'dead') as "dead!",
    (select count(*) from job where state = 'cancelled') as "cancelled!",
    (select extract(epoch from clock.now - min(created_at))::float8
       from job where state = 'queued') as "oldest_queued_secs?",
    (select count(*) from job
       where state = 'dead' and finished_at > clock.now - interval '1 hour') as "dead_last_hour!",
    (select count(*) from job
       where state = 'running' and (lease_until <= clock.now or deadline_at <= clock.now))
       as "stuck_running!",
    (select count(*) from job_attempt
       where ended = 'deadline' and ended_at > clock.now - interval '1 hour')
       as "deadline_kills_last_hour!",
    -- What every attempt cost, recorded in the rolling hour: the spend_minute buckets the
    -- spend caps of the claim statements read (at most 60 rows a mall).
    (select coalesce(sum(cost_usd), 0)::float8 from spend_minute
       where minute > clock.now - interval '1 hour') as "cost_usd_last_hour!"
from clock
