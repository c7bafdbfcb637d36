-- An operator's retry: a dead delivery pending again, due now, with fresh attempts (its
-- last error kept until the next attempt). No row when it is not dead; the caller then
-- tells an unknown id from another state.
-- $1 delivery, $2 now.
update delivery set
    state = 'pending',
    attempts = 0,
    next_attempt_at = coalesce($2::timestamptz, clock_timestamp())
where delivery_id = $1 and state = 'dead'
returning delivery_id
