-- The schedules' figures of the ops snapshot: active and paused ones, active ones whose
-- run is due but waits for the previous run to finish, and those whose last due run could
-- not start (`last_error`). One pass over `schedule` (a row per watchlist, not per run).
-- $1 now (null: the database clock).
with clock as materialized (select coalesce($1::timestamptz, clock_timestamp()) as now)
select
    count(*) filter (where not paused) as "active!",
    count(*) filter (where paused) as "paused!",
    count(*) filter (where not paused and next_run_at <= clock.now
                       and evaluated_run < run_number) as "waiting!",
    count(*) filter (where last_error is not null) as "failing!"
from schedule, clock
