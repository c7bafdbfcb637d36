-- The queue's part of the ops snapshot, in one round trip. $1 now.
--
-- Nothing here reads history: the active states are counted from their partial indexes
-- (job_queued_age, job_running_lease: as many entries as jobs in hand), the final states
-- from job_tally (at most 16 rows each, kept with the transitions: migration 0019), the
-- windows from indexes on their time column (job_finished_at, job_attempt_ended_at,
-- spend_minute), so the cost follows the work of the last hour, not the table's size.
with clock as materialized (select coalesce($1::timestamptz, clock_timestamp()) as now),
tally as materialized (
    select coalesce(sum(n) filter (where state = 'done'), 0)::bigint as done,
           coalesce(sum(n) filter (where state = 'dead'), 0)::bigint as dead,
           coalesce(sum(n) filter (where state = 'cancelled'), 0)::bigint as cancelled
    from job_tally
)
select
    (select count(*) from job where state = 'queued') as "queued!",
    (select count(*) from job where state = 'running') as "running!",
    tally.done as "done!",
    tally.dead as "dead!",
    tally.cancelled as "cancelled!",
    (select extract(epoch from clock.now - min(created_at))::float8
       from job where state = 'queued') as "oldest_queued_secs?",
    (select count(*) from job
       where finished_at > clock.now - interval '1 hour' and state = 'dead') as "dead_last_hour!",
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
from clock, tally
