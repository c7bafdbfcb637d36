-- Deliveries newest first, one page: all, dead only ($1), of one search ($2), before id $3.
-- $4 limit.
select delivery_id, event_id, search_id, product_index, search_version, schedule_id,
       alert_rule, destination,
       state as "state: DeliveryState", attempts, next_attempt_at, created_at,
       delivered_at, last_status, last_error
from delivery
where (not $1::boolean or state = 'dead')
  and ($2::bigint is null or search_id = $2::bigint)
  and ($3::bigint is null or delivery_id < $3::bigint)
order by delivery_id desc
limit $4
