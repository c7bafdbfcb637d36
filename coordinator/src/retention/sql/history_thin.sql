-- Retention: thins price history observed before the age ($1 ms) to one entry per
-- client, product, lowest mall and UTC day: the day's newest complete entry, or its newest
-- entry when none is complete. A client's newest entry of a product always survives. The batch scans the
-- next $2 entries in (observed_at, id) order after the cursor ($3, $4) and deletes those
-- that may go, skipping rows others hold. Returns the rows deleted, the rows scanned and
-- the last scanned key.
-- NB: one sweep runs at a time (advisory lock), so two statements never delete each
-- other's survivors. `offset 0` keeps each EXISTS a per-row subplan on
-- price_history_product.
with scanned as (
    select h.id, h.observed_at
    from price_history h
    where h.observed_at < now() - $1::bigint * interval '1 millisecond'
      and (h.observed_at, h.id) > ($3::timestamptz, $4::bigint)
    order by h.observed_at, h.id
    limit $2
),
victims as (
    select h.id
    from price_history h
    where h.id = any(array(select id from scanned))
      and exists (
          select 1 from price_history n
          where n.product_key = h.product_key and n.client = h.client
            and (n.observed_at, n.id) > (h.observed_at, h.id)
          offset 0)
      and exists (
          select 1 from price_history k
          where k.product_key = h.product_key and k.client = h.client
            and k.lowest_mall = h.lowest_mall
            and k.observed_at >= date_trunc('day', h.observed_at, 'UTC')
            and k.observed_at < date_trunc('day', h.observed_at, 'UTC') + interval '1 day'
            and (k.complete, k.observed_at, k.id) > (h.complete, h.observed_at, h.id)
          offset 0)
    for update of h skip locked
),
deleted as (
    delete from price_history h
    where h.id = any(array(select id from victims))
    returning h.id
)
select (select count(*) from deleted) as "deleted!",
       (select count(*) from scanned) as "scanned!",
       (select max(observed_at) from scanned) as last_at,
       (select id from scanned order by observed_at desc, id desc limit 1) as last_id
