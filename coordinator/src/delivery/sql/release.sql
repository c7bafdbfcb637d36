-- Give a claim back unattempted (the payload could not be read: the database, not the
-- receiver, failed): pending again after $4 ms, the attempt not counted. Zero rows: the
-- claim is no longer current.
-- $1 delivery, $2 worker, $3 attempt, $4 delay (ms), $5 now.
update delivery set
    state = 'pending',
    claimed_by = null,
    attempts = attempts - 1,
    next_attempt_at = coalesce($5::timestamptz, clock_timestamp()) + $4::bigint * interval '1 millisecond'
where delivery_id = $1 and state = 'delivering' and claimed_by = $2::text and attempts = $3
returning delivery_id
