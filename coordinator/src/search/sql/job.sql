-- One job for GetJob, with its offers as GetSearch orders them: those with known shipping
-- first, cheapest (effective price) first, then those whose shipping is unknown; at the
-- same price lower shipping, then the rank the coordinator gave.
-- A job is a crawl shared by every search of the same query (migration 0025), so its
-- product is shown as the caller asked for it: the product of the caller's first search
-- answered by the job (an admin: of the first search), else the crawl's own (name and
-- hints, no code). The node is the one holding
-- the lease, else the one of the job's last attempt (kept after the job ended).
-- A client sees a job only when one of its searches has an item answered by it.
-- Its runs come along oldest first (job_attempt rows as JSON, evidence included).
-- $1 job_id, $2 client (null: any, an admin).
select
    j.job_id,
    coalesce(asked.product_code, j.product_code) as product_code,
    coalesce(asked.product_name, j.product_name) as "product_name!",
    coalesce(asked.product_brand, j.product_brand) as product_brand,
    coalesce(asked.product_model_code, j.product_model_code) as product_model_code,
    coalesce(asked.product_gtin, j.product_gtin) as product_gtin,
    j.mall,
    j.state as "state!: JobState",
    j.priority, j.attempts, j.max_attempts, j.reclaims, j.lease_epoch,
    coalesce(j.node_id,
             (select a.node_id from job_attempt a
               where a.job_id = j.job_id and a.node_id is not null
               order by a.lease_epoch desc limit 1)) as node_id,
    j.created_at, j.run_after, j.run_started_at, j.deadline_at, j.finished_at,
    j.outcome as "outcome?: Outcome",
    j.error_class as "error_class?: ErrorClass",
    j.last_error, j.rounds, j.bytes, j.cost_usd, j.traceparent,
    coalesce(
        (select jsonb_agg(jsonb_build_object(
                    'lease_epoch', a.lease_epoch, 'node_id', a.node_id,
                    'started_at', a.started_at, 'ended_at', a.ended_at, 'ended', a.ended,
                    'error_class', a.error_class, 'error', a.error, 'bytes', a.bytes,
                    'cost_usd', a.cost_usd, 'evidence', a.evidence)
                 order by a.lease_epoch)
           from job_attempt a where a.job_id = j.job_id),
        '[]'::jsonb) as "runs!: Json<Vec<AttemptInfo>>",
    coalesce(
        (select jsonb_agg(jsonb_build_object(
                    'title', o.title, 'price', o.price, 'shipping_fee', o.shipping_fee,
                    'url', o.url, 'seller', o.seller, 'match_score', o.match_score,
                    'shipping', o.shipping_status, 'list_price', o.list_price,
                    'flags', o.flags)
                 order by o.shipping_status = 'unknown', o.effective_price, o.shipping_fee,
                          o.rank)
           from offer o where o.job_id = j.job_id),
        '[]'::jsonb) as "offers!: Json<Vec<OfferRow>>"
from job j
left join lateral (
    select sp.product_code, sp.product_name, sp.product_brand, sp.product_model_code,
           sp.product_gtin
    from search_item si
    join search_request r on r.search_id = si.search_id
    join search_product sp on sp.search_id = si.search_id
                          and sp.product_index = si.product_index
    where si.job_id = j.job_id and ($2::text is null or r.client = $2::text)
    order by si.search_id, si.item_no
    limit 1
) asked on true
where j.job_id = $1
  and ($2::text is null or exists (
        select 1 from search_item si join search_request r on r.search_id = si.search_id
        where si.job_id = j.job_id and r.client = $2::text))
