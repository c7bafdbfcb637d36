-- LPS schema, part 2: the proxy-port ledger and the IP-session and bot-block records.
--
-- Forward-only. `proxy_port` is the single truth about exit IPs shared by every
-- coordinator and node: acquire is one UPDATE over a FOR UPDATE SKIP LOCKED pick, and a
-- lease that is not renewed simply expires (a dead node never holds an IP forever).

create type session_end_reason as enum (
    'budget', 'block', 'proxy_error', 'window', 'idle', 'shutdown', 'rotate'
);

create table proxy_port (
    host           text    not null check (char_length(host) between 1 and 253),
    port           integer not null check (port between 1 and 65535),
    -- False once a port was removed from configuration: kept for its history, never granted.
    enabled        boolean not null default true,
    -- Leased to holder_node until this time (renewed by the node's heartbeats).
    holder_node    text,
    holder_job     bigint,
    leased_until   timestamptz,
    -- Resting after its per-IP request budget was used up.
    rest_until     timestamptz,
    -- Cooling down for every mall (proxy errors, or a block not specific to a mall).
    cooldown_until timestamptz,
    last_used_at   timestamptz,
    use_count      bigint  not null default 0 check (use_count >= 0),
    -- Times this IP was blocked; the cooldown grows exponentially in it.
    burn_count     integer not null default 0 check (burn_count >= 0),
    last_reason    session_end_reason,
    primary key (host, port),
    -- A lease has a holder and an end; no holder, no lease.
    constraint proxy_port_lease_has_holder check ((holder_node is null) = (leased_until is null))
);

-- LRU pick over enabled ports: least recently used first (never-used ports first of all).
create index proxy_port_lru on proxy_port (last_used_at asc nulls first, host, port) where enabled;

-- Per-mall cooldowns of a port after a mall-specific block.
create table proxy_port_cooldown (
    host           text        not null,
    port           integer     not null,
    mall           text        not null,
    cooldown_until timestamptz not null,
    primary key (host, port, mall),
    foreign key (host, port) references proxy_port (host, port) on delete cascade
);

-- One row per ended IP session: the data the per-IP budget is tuned from.
create table ip_session (
    id           bigint generated always as identity primary key,
    host         text        not null,
    port         integer     not null,
    mall         text        not null,
    node_id      text,
    job_id       bigint,
    requests     integer     not null check (requests >= 0),
    ok           integer     not null check (ok >= 0),
    blocked      integer     not null check (blocked >= 0),
    elapsed_ms   bigint      not null check (elapsed_ms >= 0),
    end_reason   session_end_reason not null,
    ended_at     timestamptz not null default now(),
    check (ok + blocked <= requests)
);
create index ip_session_ended on ip_session (ended_at);
create index ip_session_mall on ip_session (mall, ended_at);

-- One row per detected bot block.
create table bot_detection (
    id            bigint generated always as identity primary key,
    mall          text        not null,
    query         text        not null default '',
    ip_request_no integer     not null check (ip_request_no >= 0),
    host          text,
    port          integer,
    marker        text        not null default '',
    html_len      integer     not null default 0 check (html_len >= 0),
    headless      boolean     not null default true,
    elapsed_ms    bigint      not null default 0 check (elapsed_ms >= 0),
    node_id       text,
    job_id        bigint,
    detected_at   timestamptz not null default now()
);
create index bot_detection_at on bot_detection (detected_at);

