-- Gives back replica $2's claim of schedule $1 (whose last run is $3) without a run: due
-- again at $4 (the same time: a transient failure, tried again at the next pass; a later
-- one: the run could not start, and $5 says why). Zero rows: the claim was lost.
-- $6 now (null: the database clock).
with clock as materialized (select coalesce($6::timestamptz, now()) as now)
update schedule s set
    next_run_at = $4::timestamptz,
    last_error = coalesce($5::text, s.last_error),
    claimed_by = null,
    claim_until = null,
    updated_at = clock.now
from clock
where s.schedule_id = $1::bigint and s.claimed_by = $2::text and s.run_number = $3::int
returning s.schedule_id
