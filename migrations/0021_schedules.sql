-- LPS schema, part 21: schedules (watchlists) and their price-move events.
--
-- A schedule is a stored product list searched again and again: at an interval or by a
-- cron pattern, at a priority, with price-move rules whose events go to destinations
-- through the outbox (0018). Any replica's scheduler claims a due schedule with FOR UPDATE
-- SKIP LOCKED on `next_run_at` and starts its run as a search of the schedule's client
-- (idempotency key `schedule-<id>-run-<n>`, so a replica that dies between the search and
-- recording it here starts nothing twice); when that search is final its rules are
-- evaluated once, in one transaction with the observations and events they produce.

create table schedule (
    schedule_id     bigint generated always as identity primary key,
    -- The client (token name) it belongs to; its runs' searches are that client's.
    client          text not null,
    -- The client's idempotency key for CreateSchedule and the digest of what it asked.
    idempotency_key text check (length(idempotency_key) between 1 and 128),
    request_digest  text not null,
    -- [{"code": …, "name": …}], as a search request's products; 1..=200.
    products        jsonb not null check (jsonb_typeof(products) = 'array'
                                          and jsonb_array_length(products) between 1 and 200),
    -- Empty: every mall enabled when a run starts.
    malls           text[] not null default '{}' check (cardinality(malls) <= 20),
    -- Exactly one of an interval (ms) and a cron pattern (UTC).
    interval_ms     bigint check (interval_ms >= 1000),
    cron            text check (length(cron) between 1 and 200),
    priority        smallint not null check (priority between 0 and 99),
    destinations    text[] not null default '{}' check (cardinality(destinations) <= 8),
    -- [{"product_index": n|null, "below": n|null, "move_percent": x|null}], at most 200.
    rules           jsonb not null default '[]' check (jsonb_typeof(rules) = 'array'
                                                       and jsonb_array_length(rules) <= 200),
    paused          boolean not null default false,
    next_run_at     timestamptz not null,
    -- Runs started (the current or last run's number), and the last run whose search was
    -- evaluated. A schedule is due only when they are equal: the previous run is final and
    -- evaluated, so runs never overlap.
    run_number      int not null default 0 check (run_number >= 0),
    evaluated_run   int not null default 0 check (evaluated_run between 0 and run_number),
    -- The current (or last) run's search. Kept by retention while the schedule exists
    -- (retention/sql/searches.sql); `set null` only for a search removed by hand.
    last_search_id  bigint references search_request (search_id) on delete set null,
    last_run_at     timestamptz,
    -- Why the last due run could not start (a mall since disabled); null when it started.
    last_error      text,
    -- A claimed schedule names its replica until `claim_until`; a claim that outlives it
    -- (the replica died between the claim and recording the run) is claimable again.
    claimed_by      text,
    claim_until     timestamptz,
    created_at      timestamptz not null default now(),
    updated_at      timestamptz not null default now(),
    check ((interval_ms is null) <> (cron is null)),
    check ((claimed_by is null) = (claim_until is null)),
    check (run_number = 0 or last_run_at is not null),
    -- Idempotency keys are per client; nulls (no key) never conflict.
    constraint schedule_client_key unique (client, idempotency_key)
);

-- The claim order, exactly: schedules not paused by due time.
create index schedule_due on schedule (next_run_at, schedule_id) where not paused;
-- Runs whose search is not yet evaluated (few at any time): the evaluation pass.
create index schedule_unevaluated on schedule (schedule_id) where evaluated_run < run_number;
-- ListSchedules per client, newest first.
create index schedule_client on schedule (client, schedule_id);
-- Retention's check that a search is a schedule's current run.
create index schedule_last_search on schedule (last_search_id);

-- The previous observation of each product of a schedule: what the next evaluation
-- compares with. Its own row, written in the evaluation's transaction, so no retention
-- rule on searches or price history can take it away, and a repeated evaluation of a run
-- (evaluated_run fences it) never compares a price with itself.
create table schedule_observation (
    schedule_id     bigint not null references schedule (schedule_id) on delete cascade,
    product_index   int not null check (product_index between 0 and 199),
    run_number      int not null check (run_number >= 1),
    -- The search that observed it (no reference: it may be deleted long before).
    search_id       bigint not null,
    lowest_effective_price bigint not null check (lowest_effective_price >= 0),
    observed_at     timestamptz not null,
    primary key (schedule_id, product_index)
);

-- Price-move events ride the outbox as `delivery` rows with the schedule and run set, and
-- their body rendered when they are stored (what fired is known then, not later).
alter table delivery add column schedule_id bigint;
alter table delivery add column schedule_run int;
alter table delivery add constraint delivery_price_move_shape check (
    (schedule_id is null) = (schedule_run is null)
    and (schedule_id is null or (product_index is not null and body is not null)));
-- One event per (schedule, run, product, destination): the evaluation inserts with ON
-- CONFLICT DO NOTHING, so it cannot enqueue an event twice. The search events' own key
-- (delivery_event) stays theirs.
create unique index delivery_price_move
    on delivery (schedule_id, schedule_run, product_index, destination)
    where schedule_id is not null;
drop index delivery_event;
create unique index delivery_event
    on delivery (search_id, coalesce(product_index, -1), search_version, destination)
    where schedule_id is null;
