-- Retention: one batch of price-history entries observed before the age ($1 ms), except
-- each product's newest entry of each client (the previous observation a new one is read
-- against), which survives any age. The batch scans the next $2 entries in (observed_at, id) order after
-- the cursor ($3, $4) and deletes those that may go, skipping rows others hold. Returns
-- the rows deleted, the rows scanned and the last scanned key.
-- NB: `offset 0` keeps the EXISTS a per-row subplan on price_history_product.
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
