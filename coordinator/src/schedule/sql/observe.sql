-- Stores run $2's observations of schedule $1 (search $3, at $4): the lowest effective
-- price $6[i] of product $5[i]; a product without a price keeps its previous one.
insert into schedule_observation (schedule_id, product_index, run_number, search_id,
                                  lowest_effective_price, observed_at)
select $1::bigint, o.product_index, $2::int, $3::bigint, o.price, $4::timestamptz
from unnest($5::int[], $6::bigint[]) as o (product_index, price)
on conflict (schedule_id, product_index) do update set
    run_number = excluded.run_number,
    search_id = excluded.search_id,
    lowest_effective_price = excluded.lowest_effective_price,
    observed_at = excluded.observed_at
