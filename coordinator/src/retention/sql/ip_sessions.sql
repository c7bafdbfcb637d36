-- Retention: one batch of IP-session ends older than the age ($1 ms, by ended_at). The
-- batch scans the next $2 rows in (ended_at, id) order after the cursor ($3, $4) and
-- deletes them, skipping rows others hold. Returns the rows deleted, the rows scanned and
-- the last scanned key.
with scanned as (
    select r.id, r.ended_at
    from ip_session r
    where r.ended_at < now() - $1::bigint * interval '1 millisecond'
      and (r.ended_at, r.id) > ($3::timestamptz, $4::bigint)
    order by r.ended_at, r.id
    limit $2
),
victims as (
    select r.id
    from ip_session r
    where r.id = any(array(select id from scanned))
    for update of r skip locked
),
deleted as (
    delete from ip_session r
    where r.id = any(array(select id from victims))
    returning r.id
)
select (select count(*) from deleted) as "deleted!",
       (select count(*) from scanned) as "scanned!",
       (select max(ended_at) from scanned) as last_at,
       (select id from scanned order by ended_at desc, id desc limit 1) as last_id
