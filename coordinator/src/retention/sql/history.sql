-- Retention: a batch of price-history entries observed before the age ($1 ms), except
-- each product's newest entry (the previous observation a new one is read against), which
-- survives any age. Key-range batches in (observed_at, id) order after the cursor ($3,
-- $4), at most $2 rows, skipping rows others hold.
with victims as (
    select h.id, h.observed_at
    from price_history h
    where h.observed_at < now() - $1::bigint * interval '1 millisecond'
      and (h.observed_at, h.id) > ($3::timestamptz, $4::bigint)
      and exists (
          select 1 from price_history n
          where n.product_key = h.product_key
            and (n.observed_at, n.id) > (h.observed_at, h.id))
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
