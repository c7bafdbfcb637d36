-- Everything GetSearch shows, in one statement (one snapshot): the request, its products
-- as its client asked for them (search_product), its items in order, each item's job, and
-- the job's first $2 offers: those with known shipping first, cheapest (effective price)
-- first, then those whose shipping is unknown, cheapest (price) first; at the same price
-- lower shipping, then the rank (GetJob shows them all). The cheapest offer whose shipping
-- is unknown comes along even when $2 offers with known shipping are ahead of it: a
-- product's "possibly lower" is read from those. No rows: no such search.
-- $1 search_id, $2 offers per item.
select
    r.created_at,
    r.cancelled_at,
    r.client,
    r.caller,
    si.item_no,
    si.product_index,
    si.mall,
    si.job_id,
    si.disposition::text as "disposition!",
    j.state as "state!: JobState",
    j.outcome as "outcome?: Outcome",
    j.error_class as "error_class?: ErrorClass",
    j.last_error,
    j.attempts,
    sp.product_code,
    sp.product_name,
    sp.product_brand,
    sp.product_model_code,
    sp.product_gtin,
    j.change_seq,
    coalesce(
        (select jsonb_agg(jsonb_build_object(
                    'title', o.title, 'price', o.price, 'shipping_fee', o.shipping_fee,
                    'url', o.url, 'seller', o.seller, 'match_score', o.match_score,
                    'shipping', o.shipping_status, 'list_price', o.list_price,
                    'flags', o.flags)
                 order by o.n)
           from (select offer.*,
                        row_number() over (order by offer.shipping_status = 'unknown',
                                                    offer.effective_price,
                                                    offer.shipping_fee, offer.rank) as n,
                        row_number() over (partition by offer.shipping_status = 'unknown'
                                           order by offer.effective_price,
                                                    offer.shipping_fee, offer.rank) as k
                   from offer
                  where offer.job_id = j.job_id) o
          where o.n <= $2 or o.k = 1),
        '[]'::jsonb) as "offers!: Json<Vec<OfferRow>>"
from search_request r
join search_item si on si.search_id = r.search_id
join search_product sp on sp.search_id = si.search_id and sp.product_index = si.product_index
join job j on j.job_id = si.job_id
where r.search_id = $1
order by si.product_index, si.item_no
