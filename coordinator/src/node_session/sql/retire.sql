-- Retention: one batch of node_session rows whose stream ended (disconnected_at), or was
-- last seen (a crashed coordinator's stream, never marked), longer ago than the age ($1
-- ms). Never a live stream: one is refreshed at least every 30 s plus a heartbeat, and the
-- age is at least an hour. The batch scans the next $2 rows in (ended, row_id) order after
-- the cursor ($3, $4) — index node_session_ended — and deletes them, skipping rows a
-- stream holds right now (a reconnect's upsert then inserts the row anew). A deleted
-- row's drain mark goes with it: a node away that long starts undrained. A quarantined
-- node's row stays until its quarantine ended.
with scanned as (
    select n.row_id, coalesce(n.disconnected_at, n.last_seen_at) as ended_at
    from node_session n
    where coalesce(n.disconnected_at, n.last_seen_at) < now() - $1::bigint * interval '1 millisecond'
      and (coalesce(n.disconnected_at, n.last_seen_at), n.row_id) > ($3::timestamptz, $4::bigint)
    order by coalesce(n.disconnected_at, n.last_seen_at), n.row_id
    limit $2
),
victims as (
    select n.row_id
    from node_session n
    where n.row_id = any(array(select row_id from scanned))
      and coalesce(n.disconnected_at, n.last_seen_at) < now() - $1::bigint * interval '1 millisecond'
      -- A quarantine outlives the row's age only until it ends.
      and (n.quarantined_until is null or n.quarantined_until < now())
    for update of n skip locked
),
deleted as (
    delete from node_session n
    where n.row_id = any(array(select row_id from victims))
    returning n.row_id
)
select (select count(*) from deleted) as "deleted!",
       (select count(*) from scanned) as "scanned!",
       (select max(ended_at) from scanned) as last_at,
       (select row_id from scanned order by ended_at desc, row_id desc limit 1) as last_id
