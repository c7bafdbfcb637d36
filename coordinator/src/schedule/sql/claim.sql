-- Claims at most $2 due schedules for replica $1, each for $3 ms: not paused, due by now,
-- their previous run's search final and evaluated (evaluated_run = run_number, so runs
-- never overlap), and not claimed by another replica (or its claim expired: it died
-- between the claim and recording the run), oldest due first. FOR UPDATE SKIP LOCKED
-- inside the UPDATE: replicas claiming at once take different schedules, never one twice.
-- $4 now (null: the database clock).
-- NB: schedules whose run is still going are due but skipped here; the index
-- schedule_due stops the scan at the first not yet due, so they cost a row each.
with
clock as materialized (select coalesce($4::timestamptz, clock_timestamp()) as now),
due as materialized (
    select s.schedule_id
    from schedule s, clock
    where not s.paused and s.next_run_at <= clock.now
      and s.evaluated_run = s.run_number
      and (s.claim_until is null or s.claim_until <= clock.now)
    order by s.next_run_at, s.schedule_id
    limit $2
    for update of s skip locked
)
update schedule s set
    claimed_by = $1::text,
    claim_until = clock.now + $3::bigint * interval '1 millisecond'
from due, clock
where s.schedule_id = due.schedule_id
returning s.schedule_id, s.client, s.products, s.malls, s.interval_ms, s.cron, s.priority,
          s.run_number, s.next_run_at, clock.now as "now!"
