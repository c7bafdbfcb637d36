-- Deletes schedule $1 (with its observations, by cascade) if it is client $2's (null: any
-- client's, an admin). Its stored price-move events stay in the outbox and are delivered.
delete from schedule
where schedule_id = $1::bigint and ($2::text is null or client = $2::text)
returning schedule_id
