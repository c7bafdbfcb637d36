-- Retention: one batch of delivered outbox rows, delivered before the age ($1 ms). Pending,
-- delivering and dead rows are never deleted here (nor their search: searches.sql). The
-- batch scans the next $2 delivered rows in (delivered_at, delivery_id) order after the
-- cursor ($3, $4) — index delivery_delivered — and deletes them, skipping rows others hold.
-- Returns the rows deleted, the rows scanned and the last scanned key.
with scanned as (
    select d.delivery_id, d.delivered_at
    from delivery d
    where d.state = 'delivered'
      and d.delivered_at < now() - $1::bigint * interval '1 millisecond'
      and (d.delivered_at, d.delivery_id) > ($3::timestamptz, $4::bigint)
    order by d.delivered_at, d.delivery_id
    limit $2
),
victims as (
    select d.delivery_id
    from delivery d
    where d.delivery_id = any(array(select delivery_id from scanned))
      and d.state = 'delivered'
    for update of d skip locked
),
deleted as (
    delete from delivery d
    where d.delivery_id = any(array(select delivery_id from victims))
    returning d.delivery_id
)
select (select count(*) from deleted) as "deleted!",
       (select count(*) from scanned) as "scanned!",
       (select max(delivered_at) from scanned) as last_at,
       (select delivery_id from scanned order by delivered_at desc, delivery_id desc limit 1)
           as last_id
