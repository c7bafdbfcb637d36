-- Schedules newest first: one ($1), or one page of client $2's (null: every client's)
-- before schedule $3, at most $4.
select schedule_id, client, products, malls, interval_ms, cron, priority, destinations,
       rules, paused, next_run_at, run_number, last_search_id, last_run_at, last_error,
       created_at, updated_at
from schedule
where ($1::bigint is null or schedule_id = $1::bigint)
  and ($2::text is null or client = $2::text)
  and ($3::bigint is null or schedule_id < $3::bigint)
order by schedule_id desc
limit $4
