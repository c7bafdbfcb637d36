-- A node's stream starts (its Hello was accepted): the node's row now names this stream
-- ($2), this replica ($3) and what the node said. An operator's drain survives a reconnect
-- of the same node process ($7 instance), not a new process under the id.
-- NB: another replica's live stream of another node process under this id is not taken
-- over (this replica's own streams are the registry's business): no row then. A row not
-- seen for 90 s belongs to a coordinator that crashed (see connected.sql).
-- $1 node_id, $4 version, $5 slots (also the free slots), $6 malls. Returns whether the
-- node is to drain, its quarantine (dropped.sql; null: none), and whether the row is new
-- (`xmax = 0` only for a row this statement inserted): a new row of a stream that is never
-- welcomed is deleted again (forget_unwelcomed.sql).
insert into node_session (node_id, session_id, coordinator_id, version, slots, free_slots, malls, instance)
values ($1, $2, $3, $4, $5, $5, $6, $7)
on conflict (node_id) do update set
    session_id = excluded.session_id, coordinator_id = excluded.coordinator_id,
    version = excluded.version, slots = excluded.slots, free_slots = excluded.free_slots,
    malls = excluded.malls, connected_at = now(), last_seen_at = now(),
    draining = coalesce(node_session.draining and node_session.instance = excluded.instance, false),
    instance = excluded.instance, disconnected_at = null
where node_session.disconnected_at is not null
   or node_session.coordinator_id = excluded.coordinator_id
   or node_session.last_seen_at <= now() - interval '90 seconds'
   or node_session.instance is null or excluded.instance is null
   or node_session.instance = excluded.instance
returning draining, quarantined_until, (xmax = 0) as "new_row!"
