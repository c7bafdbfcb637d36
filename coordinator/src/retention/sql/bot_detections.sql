-- Retention: one batch of bot-detection records older than the age ($1 ms, by detected_at). The
-- batch scans the next $2 rows in (detected_at, id) order after the cursor ($3, $4) and
-- deletes them, skipping rows others hold. Returns the rows deleted, the rows scanned and
-- the last scanned key.
with scanned as (
    select r.id, r.detected_at
    from bot_detection r
    where r.detected_at < now() - $1::bigint * interval '1 millisecond'
      and (r.detected_at, r.id) > ($3::timestamptz, $4::bigint)
    order by r.detected_at, r.id
    limit $2
),
victims as (
    select r.id
    from bot_detection r
    where r.id = any(array(select id from scanned))
    for update of r skip locked
),
deleted as (
    delete from bot_detection r
    where r.id = any(array(select id from victims))
    returning r.id
)
select (select count(*) from deleted) as "deleted!",
       (select count(*) from scanned) as "scanned!",
       (select max(detected_at) from scanned) as last_at,
       (select id from scanned order by detected_at desc, id desc limit 1) as last_id
