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
