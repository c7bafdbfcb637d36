-- LPS schema, part 12: rolling restarts of the coordinator.
--
-- Which node process holds a node id's stream: `instance` is the node's `Hello.instance` (random per node process, kept over its
-- reconnects). An operator's drain survives a reconnect of the same process: a drain that
-- reached no stream (the node was between streams) is sent when it comes back, and every
-- heartbeat answer repeats it; a new process under the same id starts undrained.
alter table node_session add column instance text;

-- Which configuration revision (`LPS_CONFIG_REVISION`) last wrote the settings every
-- replica shares (the mall rows and the proxy ports), so that a replica of an older
-- revision starting later does not write its older settings over them.
create table config_revision (
    scope          text primary key,
    revision       bigint not null check (revision >= 0),
    coordinator_id text not null,
    applied_at     timestamptz not null default now()
);
