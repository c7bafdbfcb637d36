-- For each product of each search with a job that finished since $1: once every mall
-- item of the product is final, record the product's lowest effective price and the
-- lowest offer per mall as a price_history entry. At most one entry per search and product
-- (unique index), so overlapping sweeps and replicas sweeping together are harmless.
--
-- Only offers whose shipping is known count (shipping_status <> 'unknown'): an unknown
-- fee makes the effective price a lower bound, not a price anyone paid. A product whose
-- offers all have unknown shipping records no entry (its history shows no answer for that
-- search rather than a made-up one), and a mall whose offers all have unknown shipping is
-- left out of the entry's malls.
with
items as (
    select distinct si.search_id, si.product_index
    from job j
    join search_item si on si.job_id = j.job_id
    where j.finished_at >= $1::timestamptz
),
groups as (
    select i.search_id, i.product_index, min(j.product_key) as product_key,
           bool_and(j.state in ('done', 'dead', 'cancelled')) as final
    from items i
    join search_item si on si.search_id = i.search_id and si.product_index = i.product_index
    join job j on j.job_id = si.job_id
    group by i.search_id, i.product_index
),
best as (
    select g.search_id, g.product_index, g.product_key, o.mall, o.price, o.shipping_fee,
           o.shipping_status, o.effective_price, o.url, o.title,
           row_number() over (partition by g.search_id, g.product_index, o.mall
                              order by o.effective_price, o.shipping_fee, o.rank) as rn
    from groups g
    join search_item si on si.search_id = g.search_id and si.product_index = g.product_index
    join job j on j.job_id = si.job_id and j.state = 'done' and j.outcome = 'found'
    join offer o on o.job_id = j.job_id and o.shipping_status <> 'unknown'
    where g.final
)
insert into price_history (product_key, search_id, lowest_effective_price, lowest_mall, malls)
select b.product_key, b.search_id, min(b.effective_price),
       (array_agg(b.mall order by b.effective_price, b.shipping_fee))[1],
       jsonb_agg(jsonb_build_object(
           'mall', b.mall, 'price', b.price, 'shipping_fee', b.shipping_fee,
           'shipping', b.shipping_status, 'effective_price', b.effective_price,
           'url', b.url, 'title', b.title)
           order by b.effective_price)
from best b
where b.rn = 1
group by b.search_id, b.product_index, b.product_key
on conflict (search_id, product_key) where search_id is not null do nothing
returning search_id
