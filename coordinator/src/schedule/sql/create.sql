-- Stores a schedule of client $1, or finds the one its idempotency key $2 already names
-- (then `replay_digest` is what that one asked, for the caller to compare).
-- $3 digest, $4 products, $5 malls, $6 interval (ms) or $7 cron, $8 priority,
-- $9 destinations, $10 rules, $11 first run due, $12 now (null: the database clock).
-- NB: two calls racing with one new key: the loser's insert fails on schedule_client_key
-- and the caller runs the statement again, which then finds the winner's.
with
existing as (
    select schedule_id, request_digest
    from schedule
    where client = $1::text and idempotency_key = $2::text
),
inserted as (
    insert into schedule (client, idempotency_key, request_digest, products, malls,
                          interval_ms, cron, priority, destinations, rules, next_run_at,
                          created_at, updated_at)
    select $1::text, $2::text, $3::text, $4::jsonb, $5::text[], $6::bigint, $7::text,
           $8::smallint, $9::text[], $10::jsonb, $11::timestamptz,
           coalesce($12::timestamptz, now()), coalesce($12::timestamptz, now())
    where not exists (select 1 from existing)
    returning schedule_id
)
select coalesce((select schedule_id from inserted), (select schedule_id from existing))
           as "schedule_id!",
       (select request_digest from existing) as replay_digest
