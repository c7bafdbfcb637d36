-- Marks run $2 of schedule $1 evaluated: the last statement of the evaluation's
-- transaction, with its observations and events. $3 now (null: the database clock).
update schedule set evaluated_run = $2::int, updated_at = coalesce($3::timestamptz, now())
where schedule_id = $1::bigint and run_number = $2::int and evaluated_run < $2::int
returning schedule_id
