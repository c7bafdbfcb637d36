-- The receiver took the event: delivered, if the claim (worker $2, attempt $3) is still
-- current. Zero rows: the claim expired and another worker has the row.
-- $1 delivery, $2 worker, $3 attempt, $4 HTTP status, $5 body sent, $6 now.
update delivery set
    state = 'delivered',
    claimed_by = null,
    delivered_at = coalesce($6::timestamptz, clock_timestamp()),
    last_status = $4::int,
    body = coalesce(body, $5::text)
where delivery_id = $1 and state = 'delivering' and claimed_by = $2::text and attempts = $3
returning delivery_id
