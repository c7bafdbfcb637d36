-- Stores the price-move event of run $2 of schedule $1 for product $4 of its search $3
-- (at version $5): one row per destination $7[i] with event id $6[i] and its rendered body
-- $8[i]. ON CONFLICT DO NOTHING on delivery_price_move: an evaluation that runs again
-- cannot enqueue an event twice. Wakes the delivery workers when the transaction commits.
-- $9 now (null: the database clock).
with inserted as (
    insert into delivery (event_id, search_id, product_index, search_version, destination,
                          next_attempt_at, created_at, schedule_id, schedule_run, body)
    select e.event_id, $3::bigint, $4::int, $5::bigint, e.destination,
           coalesce($9::timestamptz, clock_timestamp()),
           coalesce($9::timestamptz, clock_timestamp()), $1::bigint, $2::int, e.body
    from unnest($6::uuid[], $7::text[], $8::text[]) as e (event_id, destination, body)
    on conflict do nothing
    returning delivery_id
),
notified as (
    select pg_notify('lps_delivery', '') from (select 1 from inserted limit 1) e
)
select (select count(*) from inserted) as "inserted!",
       (select count(*) from notified) as "notified!"
