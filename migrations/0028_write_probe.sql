-- LPS schema, part 28: the readiness probe's write and node quarantine.
--
-- The readiness probe's heartbeat row: each coordinator replica upserts its own row every
-- probe interval (coordinator/src/readiness.rs). A probe that only read would call a
-- database that reads but cannot write (full disk, read-only standby, statement timeouts)
-- healthy; this write makes such a replica NOT_SERVING. One row per replica id, so the
-- table stays as small as the set of replicas that ever ran; retention deletes rows no
-- replica touched for a day.
create table write_probe (
    -- LPS_COORDINATOR_ID of the replica that writes the row.
    replica text primary key check (length(replica) between 1 and 200),
    -- The last probe that wrote.
    probed_at timestamptz not null default now()
);

-- Node quarantine (DESIGN §2 "Poison means the job, not the node"): a node whose streams
-- keep dropping its jobs — a stream lost and its jobs reclaimed after the grace, or a
-- Hello that no longer lists jobs it held — takes no new jobs for a back-off. The count
-- lives on the node's row (one per node id), so it outlives the node's streams:
alter table node_session
    -- Drops within the current window (LPS_NODE_QUARANTINE_WINDOW), since drops_since.
    add column drops integer not null default 0 check (drops >= 0),
    add column drops_since timestamptz,
    -- No new assignments until then (null: never quarantined, or lifted).
    add column quarantined_until timestamptz,
    -- Why, for lpsctl nodes: how many drops within what window.
    add column quarantine_reason text,
    -- Quarantines so far; each lasts LPS_NODE_QUARANTINE doubled per earlier one (at
    -- most 16 times). Forgotten after a window without drops since the last one ended.
    add column quarantines integer not null default 0 check (quarantines >= 0),
    add constraint node_session_quarantine_reason
        check ((quarantined_until is null) = (quarantine_reason is null));
