-- The previous observations of schedule $1, one per product that had a price.
select product_index, lowest_effective_price, observed_at
from schedule_observation
where schedule_id = $1::bigint
