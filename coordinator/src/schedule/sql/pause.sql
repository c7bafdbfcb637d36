-- Pauses ($2 true) or resumes ($2 false) schedule $1 if it is client $3's (null: any
-- client's, an admin). A resumed schedule whose next run time passed while it was paused
-- is due at once (never a run per missed slot). $4 now (null: the database clock).
with clock as materialized (select coalesce($4::timestamptz, now()) as now)
update schedule s set
    paused = $2::boolean,
    next_run_at = case when $2::boolean then s.next_run_at
                       else greatest(s.next_run_at, clock.now) end,
    updated_at = clock.now
from clock
where s.schedule_id = $1::bigint and ($3::text is null or s.client = $3::text)
returning s.schedule_id
