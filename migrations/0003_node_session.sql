-- LPS schema, part 3: connected crawler nodes, shared by every coordinator replica.
--
-- Each node stream is owned by one coordinator task; this table is how the other replicas
-- (ListNodes, the ops snapshot, cancel/drain routing) learn where a node is connected.

create table node_session (
    node_id         text primary key check (char_length(node_id) between 1 and 128),
    -- Identifies the current stream; a reconnect replaces it.
    session_id      uuid not null,
    -- The coordinator replica holding the stream.
    coordinator_id  text not null,
    version         text not null default '',
    slots           integer not null check (slots between 1 and 64),
    free_slots      integer not null check (free_slots >= 0),
    malls           text[] not null default '{}',
    connected_at    timestamptz not null default now(),
    last_seen_at    timestamptz not null default now(),
    draining        boolean not null default false,
    -- Set when the stream closed; the node's jobs are released after the grace period
    -- unless it reconnects (which clears this).
    disconnected_at timestamptz
);
create index node_session_connected on node_session (coordinator_id) where disconnected_at is null;
