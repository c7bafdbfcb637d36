-- Retention: a batch of IP-session ends older than the age ($1 ms, by ended_at). Key-range
-- batches in (ended_at, id) order after the cursor ($3, $4), at most $2 rows, skipping
-- rows others hold.
with victims as (
    select r.id, r.ended_at
    from ip_session r
    where r.ended_at < now() - $1::bigint * interval '1 millisecond'
      and (r.ended_at, r.id) > ($3::timestamptz, $4::bigint)
    order by r.ended_at, r.id
    limit $2
    for update of r skip locked
),
deleted as (
    delete from ip_session r
    using victims v
    where r.id = v.id
    returning r.id as id, r.ended_at as at
)
select count(*) as "deleted!",
       max(at) as last_at,
       (array_agg(id order by at desc, id desc))[1] as last_id
from deleted
