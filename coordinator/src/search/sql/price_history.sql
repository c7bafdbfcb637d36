-- A product's price history, newest observation first (index price_history_product),
-- one page: entries observed at or after $2, complete ones only unless $4, after the
-- cursor ($5 observed_at, $6 id) when one is given.
-- $1 product_key, $2 oldest observed_at, $3 limit, $4 include incomplete entries,
-- $5/$6 cursor (null: from the newest).
select id, search_id, observed_at, lowest_effective_price, lowest_mall, malls,
       covered_malls, complete
from price_history
where product_key = $1 and observed_at >= $2
  and ($4::bool or complete)
  and ($5::timestamptz is null or (observed_at, id) < ($5::timestamptz, $6::bigint))
order by observed_at desc, id desc
limit $3
