-- Step 1 of CancelSearch: mark the request cancelled (the first cancel time is kept, so a
-- repeated cancel is harmless). From here on this search no longer keeps shared jobs alive.
-- A client cancels only its own searches: another client's is "not found" to it.
-- $1 search_id, $2 now (null: the database clock), $3 client (null: any, an admin).
update search_request
set cancelled_at = coalesce(cancelled_at, coalesce($2::timestamptz, clock_timestamp()))
where search_id = $1 and ($3::text is null or client = $3::text)
returning search_id
