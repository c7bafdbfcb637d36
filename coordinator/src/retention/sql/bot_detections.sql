-- Retention: a batch of bot-detection records older than the age ($1 ms, by detected_at). Key-range
-- batches in (detected_at, id) order after the cursor ($3, $4), at most $2 rows, skipping
-- rows others hold.
with victims as (
    select r.id, r.detected_at
    from bot_detection r
    where r.detected_at < now() - $1::bigint * interval '1 millisecond'
      and (r.detected_at, r.id) > ($3::timestamptz, $4::bigint)
    order by r.detected_at, r.id
    limit $2
    for update of r skip locked
),
deleted as (
    delete from bot_detection r
    using victims v
    where r.id = v.id
    returning r.id as id, r.detected_at as at
)
select count(*) as "deleted!",
       max(at) as last_at,
       (array_agg(id order by at desc, id desc))[1] as last_id
from deleted
