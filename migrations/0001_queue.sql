-- LPS schema, part 1: malls, the job queue, search requests, results and caches.
--
-- Forward-only: never edit this file once applied; add a new migration instead.
-- Every time column is timestamptz. Every job transition is a guarded statement in
-- coordinator/src/queue/*.sql; the constraints below are the last line of defence.

-- ---------------------------------------------------------------- malls and politeness

-- One row per mall (site profile id). The coordinator upserts these from its site profiles
-- on start. Limits here hold across every coordinator replica because the claim statement
-- enforces them in the database.
create table mall (
    mall_id          text primary key check (mall_id ~ '^[a-z0-9_-]{1,64}$'),
    enabled          boolean not null default true,
    -- Deployment-wide cap on running jobs of this mall; null = no cap. Enforced through
    -- mall_slot rows (one per allowed concurrent job).
    max_running      integer check (max_running is null or max_running between 1 and 10000),
    -- Minimum time between two job starts of this mall, in milliseconds; 0 = none.
    min_start_gap_ms integer not null default 0 check (min_start_gap_ms between 0 and 86400000),
    -- Start time of the newest job of this mall (only maintained when min_start_gap_ms > 0).
    last_start_at    timestamptz,
    updated_at       timestamptz not null default now()
);

-- The per-mall concurrency cap as rows: a running job of a capped mall holds exactly one
-- slot, taken by the claim statement (FOR UPDATE SKIP LOCKED on a free slot, so two
-- claimers can never take the same one) and freed by the trigger below when the job
-- leaves `running` by any path. A counter column would need every claimer to re-read a
-- fresh count under a lock, which READ COMMITTED does not give a single statement.
create table mall_slot (
    mall_id text    not null references mall (mall_id) on delete cascade,
    slot_no integer not null check (slot_no >= 1),
    job_id  bigint  unique,
    primary key (mall_id, slot_no)
);

-- ---------------------------------------------------------------- jobs

create type job_state as enum ('queued', 'running', 'done', 'dead', 'cancelled');
create type job_outcome as enum ('found', 'not_found');
create type error_class as enum (
    'network', 'blocked', 'page_blocked', 'proxy', 'browser', 'parse',
    'deadline', 'lease_expired', 'poison', 'permanent', 'internal'
);

-- Every change to a job takes a new number from this sequence, so a search's version
-- (the max over its jobs) only grows and WatchSearch can resume from a version.
create sequence job_change_seq;

create table job (
    job_id          bigint generated always as identity primary key,
    -- Stable identity: '<mall>|<product identity>'. At most one active job per key.
    dedupe_key      text not null,
    -- The politeness key.
    mall            text not null references mall (mall_id),
    product_code    text,
    product_name    text not null check (char_length(product_name) between 1 and 200),
    -- '<code:…|name:…>': the product identity used for caches and price history.
    product_key     text not null,
    state           job_state not null default 'queued',
    -- Lower runs first.
    priority        smallint not null check (priority between 0 and 99),
    -- Not claimable before this time (enqueue time, or the end of a retry backoff).
    run_after       timestamptz not null default now(),
    created_at      timestamptz not null default now(),
    -- Incremented by every claim and never reset: the fencing token of the current lease.
    lease_epoch     bigint not null default 0 check (lease_epoch >= 0),
    node_id         text,
    lease_until     timestamptz,
    run_started_at  timestamptz,
    -- Hard limit for the current run: no heartbeat renews a lease past it.
    deadline_at     timestamptz,
    -- How long one run may take (copied into deadline_at at claim).
    run_timeout_ms  integer not null default 300000 check (run_timeout_ms between 1000 and 86400000),
    -- Failed attempts so far (technical failures, expired leases, deadline kills).
    attempts        smallint not null default 0 check (attempts >= 0),
    max_attempts    smallint not null default 3 check (max_attempts between 1 and 50),
    -- Times the job was taken back from a lost node (not an attempt). Poison guard.
    reclaims        smallint not null default 0 check (reclaims >= 0),
    max_reclaims    smallint not null default 3 check (max_reclaims between 1 and 50),
    finished_at     timestamptz,
    outcome         job_outcome,
    error_class     error_class,
    last_error      text check (char_length(last_error) <= 2000),
    -- W3C trace context of the Search call that created the job.
    traceparent     text check (char_length(traceparent) <= 128),
    tracestate      text check (char_length(tracestate) <= 512),
    -- What the successful attempt reported.
    rounds          jsonb,
    bytes           bigint not null default 0 check (bytes >= 0),
    -- Proxy IPs this job got blocked on; past the cap it fails as page_blocked.
    ip_burns        smallint not null default 0 check (ip_burns >= 0),
    cost_usd        double precision not null default 0 check (cost_usd >= 0),
    change_seq      bigint not null default nextval('job_change_seq'),

    -- A running job has a live lease: node, lease and deadline set.
    constraint job_running_has_lease check (
        state <> 'running'
        or (node_id is not null and lease_until is not null and run_started_at is not null
            and deadline_at is not null and lease_epoch > 0)
    ),
    -- Only a running job has a holder.
    constraint job_not_running_has_no_holder check (
        state = 'running' or (node_id is null and lease_until is null)
    ),
    -- A done job has an outcome; nothing else does.
    constraint job_done_has_outcome check ((state = 'done') = (outcome is not null)),
    -- A final job has a finish time; an active one does not.
    constraint job_final_has_finished_at check (
        (state in ('done', 'dead', 'cancelled')) = (finished_at is not null)
    ),
    -- A dead job says why.
    constraint job_dead_has_error check (state <> 'dead' or error_class is not null)
);

-- Dedupe: one active (queued or running) job per key.
create unique index job_active_dedupe_key on job (dedupe_key) where state in ('queued', 'running');

-- The claim index: exactly the claim order (mall, then priority, then run_after, then id)
-- over queued jobs only, so a claim reads the head of each mall's queue and stops.
create index job_claim_order on job (mall, priority, run_after, job_id) where state = 'queued';

-- Running jobs by node (release on node loss, heartbeats) and by lease expiry (reaper).
create index job_running_node on job (node_id) where state = 'running';
create index job_running_lease on job (lease_until) where state = 'running';
create index job_running_deadline on job (deadline_at) where state = 'running';

-- Fresh-result cache: newest found result per product and mall.
create index job_found_by_key on job (dedupe_key, finished_at desc) where outcome = 'found';

-- Ops figures over the last hours.
create index job_finished_at on job (finished_at) where finished_at is not null;
create index job_queued_age on job (created_at) where state = 'queued';

-- Every state change takes a new change number (see job_change_seq).
create function job_touch() returns trigger language plpgsql as $$
begin
    new.change_seq := nextval('job_change_seq');
    return new;
end $$;

-- Only changes a watcher cares about count (a lease renewal does not).
create trigger job_touch before update on job
    for each row when (
        old.state is distinct from new.state
        or old.priority is distinct from new.priority
        or old.lease_epoch is distinct from new.lease_epoch
        or old.attempts is distinct from new.attempts
    ) execute function job_touch();

-- A job leaving `running` by any path frees its mall slot.
create function job_free_mall_slot() returns trigger language plpgsql as $$
begin
    update mall_slot set job_id = null where job_id = old.job_id;
    return null;
end $$;

create trigger job_free_mall_slot after update of state on job
    for each row when (old.state = 'running' and new.state <> 'running')
    execute function job_free_mall_slot();

-- How each run of a job ended: one row per lease that ended (completed, failed, expired,
-- killed at the deadline, taken back from a lost node, handed back, or cancelled). The
-- ops figures (deadline kills, cost per hour) and post-mortems read it.
create type attempt_end as enum (
    'done', 'failed', 'lease_expired', 'deadline', 'reclaimed', 'handed_back', 'cancelled'
);

create table job_attempt (
    job_id      bigint not null references job (job_id) on delete cascade,
    lease_epoch bigint not null check (lease_epoch > 0),
    node_id     text,
    ended_at    timestamptz not null default now(),
    ended       attempt_end not null,
    error_class error_class,
    bytes       bigint not null default 0 check (bytes >= 0),
    cost_usd    double precision not null default 0 check (cost_usd >= 0),
    primary key (job_id, lease_epoch)
);
create index job_attempt_ended_at on job_attempt (ended_at);

-- Reports that arrived for a lease that was no longer current: kept for the record,
-- never applied.
create table stale_report (
    id          bigint generated always as identity primary key,
    job_id      bigint not null references job (job_id) on delete cascade,
    lease_epoch bigint not null,
    node_id     text,
    kind        text not null check (kind in ('result', 'failure', 'renew', 'release')),
    received_at timestamptz not null default now()
);
create index stale_report_job on stale_report (job_id);

-- ---------------------------------------------------------------- searches

create type item_disposition as enum ('queued', 'joined', 'cached_result', 'cached_not_found');

create table search_request (
    search_id       bigint generated always as identity primary key,
    created_at      timestamptz not null default now(),
    priority        smallint not null check (priority between 0 and 99),
    max_age_ms      bigint check (max_age_ms > 0),
    -- Optional caller key: a repeated Search with it returns this search.
    idempotency_key text unique check (char_length(idempotency_key) between 1 and 128),
    caller          text,
    traceparent     text,
    cancelled_at    timestamptz
);

-- One row per (product, mall) of a request, pointing at the job that answers it.
create table search_item (
    search_id     bigint not null references search_request (search_id) on delete cascade,
    item_no       integer not null check (item_no >= 0),
    product_index integer not null check (product_index >= 0),
    mall          text not null references mall (mall_id),
    job_id        bigint not null references job (job_id),
    disposition   item_disposition not null,
    primary key (search_id, item_no)
);
create index search_item_job on search_item (job_id);

-- ---------------------------------------------------------------- results and caches

-- Offers of the attempt that completed the job (one attempt per job reaches done).
create table offer (
    job_id        bigint not null references job (job_id) on delete cascade,
    rank          smallint not null check (rank >= 0),
    mall          text not null,
    title         text not null check (char_length(title) between 1 and 500),
    price         bigint not null check (price >= 0),
    shipping_fee  bigint not null check (shipping_fee >= 0),
    effective_price bigint generated always as (price + shipping_fee) stored,
    url           text not null default '',
    seller        text not null default '',
    match_score   real not null check (match_score between 0 and 1),
    primary key (job_id, rank)
);

-- A verified "not found" per product and mall, remembered until expires_at (24 h). Only a
-- healthy page (never a blocked one) writes here.
create table negative_cache (
    dedupe_key text primary key,
    job_id     bigint not null references job (job_id) on delete cascade,
    created_at timestamptz not null default now(),
    expires_at timestamptz not null,
    check (expires_at > created_at)
);

-- Price history: one row per finished product answer (lowest over its malls), with the
-- per-mall lowest offers as a JSON snapshot.
create table price_history (
    id                     bigint generated always as identity primary key,
    product_key            text not null,
    search_id              bigint references search_request (search_id) on delete set null,
    recorded_at            timestamptz not null default now(),
    lowest_effective_price bigint not null check (lowest_effective_price >= 0),
    lowest_mall            text not null,
    -- [{"mall":…,"price":…,"shipping_fee":…,"effective_price":…,"url":…,"title":…}, …]
    malls                  jsonb not null check (jsonb_typeof(malls) = 'array')
);
create index price_history_product on price_history (product_key, recorded_at desc);
