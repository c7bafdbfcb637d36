-- LPS schema, part 25: a product belongs to its client; crawl work is shared only when it
-- is the same crawl (DESIGN §2 "Identity").
--
-- Before, a product's identity was `code:<code>` (else its folded name) deployment-wide:
-- two clients whose catalogs both used the code `A-1` for different products shared one
-- job (the first caller's name was searched) and each other's price history. Now:
--
-- * What a caller sees is keyed by (client, product identity): each search keeps the
--   products as its client asked for them (`search_product`, one row per product of the
--   request), GetSearch shows those, and a price-history entry belongs to the client of
--   its search (`price_history.client`) and says what was searched for it
--   (`product_code`, `product_name`) and by which schedule (`schedule_id`).
-- * A job is a crawl: its key is '<mall>|name:<folded name>' with '|<hints key>' after it
--   when the product has hints, and `product_key` holds 'name:<folded name>'. The caller's
--   code is no part of it (`product_code` is null on new jobs): two clients asking the same
--   name with the same hints share one crawl, whatever their codes; the same code with
--   two names is two crawls. The fresh-result and negative caches are looked up by the
--   same key, so they are shared exactly as the crawl is.
--
-- What an existing deployment's rows become:
-- * search_product is filled from each search's items and their jobs (before, a job's
--   product was its callers' product, so this is what they asked for).
-- * Price-history entries take the client of their search. An entry whose search was
--   already deleted, or was made before searches had clients (migration 0013), keeps
--   client '': it was visible to every client before and stays so (GetPriceHistory).
-- * Jobs keep their keys. A job of a product without a code already has the new form;
--   one of a coded product ('<mall>|code:<code>…') is never joined or answered from again:
--   the first search for that product after the upgrade crawls once (and a job active
--   during the upgrade finishes for the searches that have it). Negative-cache entries of
--   coded products are left to expire in the same way.

create table search_product (
    search_id          bigint not null references search_request (search_id) on delete cascade,
    product_index      integer not null check (product_index between 0 and 199),
    -- The client's identity of the product: 'code:<code>', else 'name:<folded name>'.
    product_key        text not null,
    product_code       text,
    product_name       text not null,
    product_brand      text,
    product_model_code text,
    product_gtin       text,
    primary key (search_id, product_index)
);

insert into search_product (search_id, product_index, product_key, product_code,
                            product_name, product_brand, product_model_code, product_gtin)
select distinct on (si.search_id, si.product_index)
       si.search_id, si.product_index, j.product_key, j.product_code, j.product_name,
       j.product_brand, j.product_model_code, j.product_gtin
from search_item si
join job j on j.job_id = si.job_id
order by si.search_id, si.product_index, si.item_no;

-- The schedule whose run a search is (null: a caller's own search).
alter table search_request add column schedule_id bigint;
update search_request r set schedule_id = s.schedule_id
from schedule s
where s.last_search_id = r.search_id;

alter table price_history add column client text not null default '';
alter table price_history alter column client drop default;
alter table price_history add column product_code text;
alter table price_history add column product_name text;
alter table price_history add column schedule_id bigint;
update price_history h set client = r.client, schedule_id = r.schedule_id
from search_request r
where r.search_id = h.search_id;
update price_history h set product_code = sp.product_code, product_name = sp.product_name
from search_product sp
where sp.search_id = h.search_id and sp.product_key = h.product_key;

-- GetPriceHistory: a client's entries of a product, newest first, paged by
-- (observed_at, id); and the entry of one search.
drop index price_history_product;
create index price_history_product
    on price_history (product_key, client, observed_at desc, id desc);

-- Writes the price-history entries of the (search, product) groups whose last job this
-- statement finished (as migration 0013's version, which this replaces): a group gets an
-- entry when every item of it is final and at least one of its malls was crawled for it and
-- answered. The entry is keyed by the product as the search's client asked for it
-- (search_product), not by the job's crawl key, and carries the client, the name and code
-- searched and the schedule of the search.
create or replace function record_price_history() returns trigger language plpgsql as $$
declare
    marked text := current_setting('lps.finished_jobs', true);
    finished_ids bigint[];
    group_key bigint;
begin
    if marked is null or marked = '' then
        return null;
    end if;
    perform set_config('lps.finished_jobs', '', true);
    finished_ids := string_to_array(rtrim(marked, ','), ',')::bigint[];
    for group_key in
        select distinct hashtextextended(si.search_id::text || '|' || sp.product_key, 13)
        from search_item si
        join search_product sp on sp.search_id = si.search_id
                              and sp.product_index = si.product_index
        where si.job_id = any(finished_ids)
        order by 1
    loop
        perform pg_advisory_xact_lock(group_key);
    end loop;

    with
    finished as (
        select unnest(finished_ids) as job_id
    ),
    groups as (
        select distinct si.search_id, si.product_index
        from finished f
        join search_item si on si.job_id = f.job_id
    ),
    members as (
        select g.search_id, g.product_index, si.mall, j.job_id, j.state, j.outcome,
               j.finished_at, si.disposition in ('queued', 'joined') as crawled
        from groups g
        join search_item si on si.search_id = g.search_id and si.product_index = g.product_index
        join job j on j.job_id = si.job_id
    ),
    summary as (
        select m.search_id, m.product_index,
               bool_and(m.state in ('done', 'dead', 'cancelled')) as final,
               bool_and(m.state = 'done') as complete,
               bool_or(m.crawled and m.state = 'done') as crawled_any,
               max(m.finished_at) filter (where m.crawled and m.state = 'done') as observed_at,
               coalesce(array_agg(distinct m.mall order by m.mall)
                            filter (where m.state = 'done'), '{}') as covered_malls
        from members m
        group by m.search_id, m.product_index
    ),
    best as (
        select s.search_id, s.product_index, m.mall, o.price, o.shipping_fee,
               o.shipping_status, o.effective_price, o.url, o.title, m.finished_at,
               not m.crawled as cached,
               row_number() over (partition by s.search_id, s.product_index, m.mall
                                  order by o.effective_price, o.shipping_fee, o.rank) as rn
        from summary s
        join members m on m.search_id = s.search_id and m.product_index = s.product_index
        join offer o on o.job_id = m.job_id and o.shipping_status <> 'unknown'
        where s.final and s.crawled_any and m.state = 'done' and m.outcome = 'found'
    ),
    entries as (
        select s.product_index, s.search_id, s.observed_at,
               min(b.effective_price) as lowest_effective_price,
               (array_agg(b.mall order by b.effective_price, b.shipping_fee, b.mall))[1]
                   as lowest_mall,
               jsonb_agg(jsonb_build_object(
                   'mall', b.mall, 'price', b.price, 'shipping_fee', b.shipping_fee,
                   'shipping', b.shipping_status, 'effective_price', b.effective_price,
                   'url', b.url, 'title', b.title, 'observed_at', b.finished_at,
                   'cached', b.cached)
                   order by b.effective_price, b.mall) as malls,
               s.covered_malls, s.complete
        from summary s
        join best b on b.search_id = s.search_id and b.product_index = s.product_index
                   and b.rn = 1
        group by s.search_id, s.product_index, s.observed_at, s.covered_malls, s.complete
    )
    insert into price_history (product_key, client, product_code, product_name, schedule_id,
                               search_id, recorded_at, observed_at, lowest_effective_price,
                               lowest_mall, malls, covered_malls, complete)
    -- NB: a request that lists one product twice has one entry for it (the unique index);
    -- the first listing's is kept.
    select distinct on (e.search_id, sp.product_key)
           sp.product_key, r.client, sp.product_code, sp.product_name, r.schedule_id,
           e.search_id, clock_timestamp(), e.observed_at, e.lowest_effective_price,
           e.lowest_mall, e.malls, e.covered_malls, e.complete
    from entries e
    join search_request r on r.search_id = e.search_id
    join search_product sp on sp.search_id = e.search_id and sp.product_index = e.product_index
    order by e.search_id, sp.product_key, e.product_index
    -- A dead job retried to the end turns an incomplete entry into the complete one.
    on conflict (search_id, product_key) where search_id is not null
    do update set recorded_at = excluded.recorded_at,
                  observed_at = excluded.observed_at,
                  lowest_effective_price = excluded.lowest_effective_price,
                  lowest_mall = excluded.lowest_mall,
                  malls = excluded.malls,
                  covered_malls = excluded.covered_malls,
                  complete = excluded.complete
    where not price_history.complete;
    return null;
end $$;
