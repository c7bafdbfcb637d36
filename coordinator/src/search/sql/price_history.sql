-- A product's price history as one client sees it, newest observation first (index
-- price_history_product), one page: entries observed at or after $2, complete ones only
-- unless $4, after the cursor ($5 observed_at, $6 id) when one is given.
-- A client sees its own entries and those that belong to no client (recorded before
-- entries had clients, migration 0025); $7 null: every client's (an admin).
-- $1 product_key (the client's identity of the product), $2 oldest observed_at, $3 limit,
-- $4 include incomplete entries, $5/$6 cursor (null: from the newest), $7 client,
-- $8 only the entry of this search (null: any).
select id, search_id, observed_at, lowest_effective_price, lowest_mall, malls,
       covered_malls, complete, client, product_code, product_name, schedule_id
from price_history
where product_key = $1 and observed_at >= $2
  and ($7::text is null or client = $7::text or client = '')
  and ($8::bigint is null or search_id = $8::bigint)
  and ($4::bool or complete)
  and ($5::timestamptz is null or (observed_at, id) < ($5::timestamptz, $6::bigint))
order by observed_at desc, id desc
limit $3
