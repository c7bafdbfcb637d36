-- LPS schema, part 18: delivery through an outbox.
--
-- A search may name destinations (operator-configured webhook receivers, by name; the URL
-- and signing secret are the coordinator's configuration, never the caller's) to be told
-- when it is final, and optionally when each of its products is final. The event is a
-- `delivery` row per destination, inserted by the statement that makes the search (or
-- product) final — the trigger below, or the enqueue statement for a search answered
-- from the caches alone — so it commits with the final status: no notification is lost
-- when a coordinator dies right after. Any replica's delivery worker claims due rows with
-- FOR UPDATE SKIP LOCKED, posts them, and records the outcome (at-least-once; the
-- receiver dedupes by `event_id`).

-- The destinations to notify (names of LPS_DESTINATIONS entries, checked on receive) and
-- whether each product's final status is an event of its own besides the search's.
alter table search_request add column destinations text[] not null default '{}'
    check (cardinality(destinations) <= 8);
alter table search_request add column notify_products boolean not null default false;

-- pending: due at next_attempt_at; delivering: claimed by a worker until next_attempt_at
-- (a claim that outlives it — the replica died — is claimable again); delivered: the
-- receiver answered 2xx; dead: every attempt failed (an operator may make it pending again).
create type delivery_state as enum ('pending', 'delivering', 'delivered', 'dead');

create table delivery (
    delivery_id     bigint generated always as identity primary key,
    -- What the receiver dedupes on: every attempt of one event carries the same id.
    event_id        uuid not null unique default gen_random_uuid(),
    search_id       bigint not null references search_request (search_id) on delete cascade,
    -- null: the search is final; else the index of the product (into the request's
    -- products) that is final.
    product_index   int check (product_index >= 0),
    -- The search's (or product's) version when it became final. A search made final again
    -- after RetryDead revived one of its jobs has a newer version: a new event.
    search_version  bigint not null,
    destination     text not null check (destination ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$'),
    state           delivery_state not null default 'pending',
    -- Attempts started; each claim adds one and fences the claim's outcome.
    attempts        int not null default 0 check (attempts >= 0),
    next_attempt_at timestamptz not null,
    claimed_by      text,
    created_at      timestamptz not null default clock_timestamp(),
    last_attempt_at timestamptz,
    delivered_at    timestamptz,
    -- The last attempt's HTTP status (null: no answer, e.g. a timeout) and error text.
    last_status     int check (last_status between 100 and 599),
    last_error      text,
    -- The payload, stored by the first attempt that rendered it; later attempts send the
    -- same bytes.
    body            text,
    -- A claimed row names its worker; no other does.
    check ((state = 'delivering') = (claimed_by is not null)),
    check (state <> 'delivered' or delivered_at is not null),
    check (state = 'pending' or attempts > 0)
);

-- One event per (search, product or none, version, destination): the trigger and the
-- enqueue statement insert with ON CONFLICT DO NOTHING.
create unique index delivery_event
    on delivery (search_id, coalesce(product_index, -1), search_version, destination);
-- The claim order, exactly: due rows (pending, or claimed with an expired claim) by time.
create index delivery_due on delivery (next_attempt_at, delivery_id)
    where state in ('pending', 'delivering');
-- `lpsctl deliveries --dead` and the ops snapshot's dead count.
create index delivery_dead on delivery (delivery_id) where state = 'dead';
-- The ops snapshot's delivered-in-the-last-hour count, and the retention sweep's cursor
-- (LPS_RETAIN_DELIVERIES: delivered rows in (delivered_at, delivery_id) order).
create index delivery_delivered on delivery (delivered_at, delivery_id) where state = 'delivered';

-- Inserts the delivery events of the searches (and, where asked, products) whose last job
-- this statement finished. The marks are the ones record_price_history() reads (set by
-- job_mark_finished, 0013); a search without destinations costs one indexed lookup per
-- finished job.
--
-- NB: this trigger must fire before job_price_history, which clears the marks: statement
-- triggers of one event fire in name order, and job_delivery_events sorts first.
-- NB: two transactions finishing a search's last two jobs at once would each see the
-- other's job still running and neither would insert. So the statement first takes a
-- transaction advisory lock per search with destinations it touches, in key order, and
-- the insert after it runs on a fresh snapshot that sees the job another transaction
-- committed while this one waited (the same scheme as the price-history trigger's
-- per-product locks). Only finishes within one search with destinations wait for each
-- other.
create function record_delivery_events() returns trigger language plpgsql as $$
declare
    marked text := current_setting('lps.finished_jobs', true);
    finished_ids bigint[];
    lock_key bigint;
begin
    if marked is null or marked = '' then
        return null;
    end if;
    finished_ids := string_to_array(rtrim(marked, ','), ',')::bigint[];
    for lock_key in
        select distinct hashtextextended('delivery|' || si.search_id::text, 13)
        from search_item si
        join search_request r on r.search_id = si.search_id
        where si.job_id = any(finished_ids) and r.destinations <> '{}'
        order by 1
    loop
        perform pg_advisory_xact_lock(lock_key);
    end loop;
    if not found then
        return null;
    end if;

    with
    touched as (
        select distinct si.search_id, si.product_index, r.notify_products
        from search_item si
        join search_request r on r.search_id = si.search_id
        where si.job_id = any(finished_ids) and r.destinations <> '{}'
    ),
    -- A search is final when none of its items' jobs is active; `not exists` stops at
    -- the first active one it meets.
    final_searches as (
        select distinct t.search_id
        from touched t
        where not exists (
            select 1 from search_item si join job j on j.job_id = si.job_id
            where si.search_id = t.search_id and j.state in ('queued', 'running'))
    ),
    final_products as (
        select t.search_id, t.product_index
        from touched t
        where t.notify_products and not exists (
            select 1 from search_item si join job j on j.job_id = si.job_id
            where si.search_id = t.search_id and si.product_index = t.product_index
              and j.state in ('queued', 'running'))
    ),
    events as (
        select f.search_id, null::int as product_index,
               (select max(j.change_seq) from search_item si join job j on j.job_id = si.job_id
                where si.search_id = f.search_id) as version
        from final_searches f
        union all
        select p.search_id, p.product_index,
               (select max(j.change_seq) from search_item si join job j on j.job_id = si.job_id
                where si.search_id = p.search_id and si.product_index = p.product_index)
        from final_products p
    )
    insert into delivery (search_id, product_index, search_version, destination,
                          next_attempt_at)
    select e.search_id, e.product_index, e.version, d.destination, clock_timestamp()
    from events e
    join search_request r on r.search_id = e.search_id
    cross join lateral unnest(r.destinations) as d (destination)
    on conflict do nothing;
    -- Wakes the delivery workers when the transaction commits (their poll is the fallback).
    if found then
        perform pg_notify('lps_delivery', '');
    end if;
    return null;
end $$;

create trigger job_delivery_events after update on job
    for each statement execute function record_delivery_events();
