-- Everything GetSearch shows, in one statement (one snapshot): the request, its items in
-- order, each item's job, and the job's cheapest $2 offers (effective price; at the same
-- effective price an offer with known shipping before one without; then shipping, then the
-- rank, which follows the same order; GetJob shows them all). No rows: no such search.
-- The job's cheapest offer with known shipping comes along even when $2 cheaper offers
-- with unknown shipping are ahead of it: a product's lowest is taken over those only.
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
    j.product_code,
    j.product_name,
    j.product_brand,
    j.product_model_code,
    j.product_gtin,
    j.change_seq,
    coalesce(
        (select jsonb_agg(jsonb_build_object(
                    'title', o.title, 'price', o.price, 'shipping_fee', o.shipping_fee,
                    'url', o.url, 'seller', o.seller, 'match_score', o.match_score,
                    'shipping', o.shipping_status, 'list_price', o.list_price,
                    'flags', o.flags)
                 order by o.n)
           from (select offer.*,
                        row_number() over (order by offer.effective_price,
                                                    offer.shipping_status = 'unknown',
                                                    offer.shipping_fee, offer.rank) as n,
                        row_number() over (partition by offer.shipping_status = 'unknown'
                                           order by offer.effective_price,
                                                    offer.shipping_fee, offer.rank) as k
                   from offer
                  where offer.job_id = j.job_id) o
          where o.n <= $2 or (o.k = 1 and o.shipping_status <> 'unknown')),
        '[]'::jsonb) as "offers!: Json<Vec<OfferRow>>"
from search_request r
join search_item si on si.search_id = r.search_id
join job j on j.job_id = si.job_id
where r.search_id = $1
order by si.product_index, si.item_no
