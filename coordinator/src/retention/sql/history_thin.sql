-- Retention: thins price history observed before the age ($1 ms) to one entry per
-- product, lowest mall and UTC day: the day's newest complete entry, or its newest entry
-- when none is complete. A product's newest entry always survives. Key-range batches in
-- (observed_at, id) order after the cursor ($3, $4), at most $2 rows, skipping rows others
-- hold. NB: one sweep runs at a time (advisory lock), so two statements never delete each
-- other's survivors.
with victims as (
    select h.id, h.observed_at
    from price_history h
    where h.observed_at < now() - $1::bigint * interval '1 millisecond'
      and (h.observed_at, h.id) > ($3::timestamptz, $4::bigint)
      and exists (
          select 1 from price_history n
          where n.product_key = h.product_key
            and (n.observed_at, n.id) > (h.observed_at, h.id))
      and exists (
          select 1 from price_history k
          where k.product_key = h.product_key
            and k.lowest_mall = h.lowest_mall
            and k.observed_at >= date_trunc('day', h.observed_at, 'UTC')
            and k.observed_at < date_trunc('day', h.observed_at, 'UTC') + interval '1 day'
            and (k.complete, k.observed_at, k.id) > (h.complete, h.observed_at, h.id))
    order by h.observed_at, h.id
    limit $2
    for update of h skip locked
),
deleted as (
    delete from price_history h
    using victims v
    where h.id = v.id
    returning h.id as id, h.observed_at as at
)
select count(*) as "deleted!",
       max(at) as last_at,
       (array_agg(id order by at desc, id desc))[1] as last_id
from deleted
