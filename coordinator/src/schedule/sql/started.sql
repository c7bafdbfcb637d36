-- Records run $3 of schedule $1 as started with search $4, if replica $2 still holds the
-- claim it made for that run (run_number is $3 - 1: nobody started it since), and makes
-- the next run due at $5. Zero rows: the claim was lost, nothing changed.
-- $6 now (null: the database clock).
with clock as materialized (select coalesce($6::timestamptz, now()) as now)
update schedule s set
    run_number = $3::int,
    last_search_id = $4::bigint,
    last_run_at = clock.now,
    last_error = null,
    next_run_at = $5::timestamptz,
    claimed_by = null,
    claim_until = null,
    updated_at = clock.now
from clock
where s.schedule_id = $1::bigint and s.claimed_by = $2::text and s.run_number = $3::int - 1
returning s.schedule_id
