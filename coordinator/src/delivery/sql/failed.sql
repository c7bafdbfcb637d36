-- An attempt failed: pending again after the backoff $7 ms, or dead when it was attempt
-- $6 (the limit) or later; if the claim (worker $2, attempt $3) is still current. Zero
-- rows: the claim expired and another worker has the row.
-- $1 delivery, $2 worker, $3 attempt, $4 HTTP status (null: no answer), $5 error,
-- $6 max attempts, $7 backoff (ms), $8 body sent (null: none rendered), $9 now.
with clock as materialized (select coalesce($9::timestamptz, clock_timestamp()) as now)
update delivery d set
    state = case when d.attempts >= $6::int then 'dead' else 'pending' end::delivery_state,
    claimed_by = null,
    next_attempt_at = case when d.attempts >= $6::int then d.next_attempt_at
                           else clock.now + $7::bigint * interval '1 millisecond' end,
    last_status = $4::int,
    last_error = $5::text,
    body = coalesce(d.body, $8::text)
from clock
where d.delivery_id = $1 and d.state = 'delivering' and d.claimed_by = $2::text
  and d.attempts = $3
returning d.state as "state: DeliveryState", d.next_attempt_at
