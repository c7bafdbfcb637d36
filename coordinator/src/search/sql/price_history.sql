-- A product's price history, newest first (index price_history_product).
-- $1 product_key, $2 oldest recorded_at, $3 limit.
select recorded_at, lowest_effective_price, lowest_mall, malls
from price_history
where product_key = $1 and recorded_at >= $2
order by recorded_at desc, id desc
limit $3
