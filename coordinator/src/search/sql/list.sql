-- ListSearches: one page of searches, newest first, of one client or of all (an admin),
-- each with how many of its items are final and its version.
-- $1 client (null: every client), $2 before this search_id (null: from the newest),
-- $3 limit.
select r.search_id, r.client, r.caller, r.created_at, r.cancelled_at,
       s.products as "products!", s.items as "items!", s.final_items as "final_items!",
       s.version as "version!"
from search_request r
cross join lateral (
    select count(distinct si.product_index) as products,
           count(*) as items,
           count(*) filter (where j.state in ('done', 'dead', 'cancelled')) as final_items,
           coalesce(max(j.change_seq), 0) as version
    from search_item si
    join job j on j.job_id = si.job_id
    where si.search_id = r.search_id
) s
where ($1::text is null or r.client = $1::text)
  and ($2::bigint is null or r.search_id < $2::bigint)
order by r.search_id desc
limit $3
