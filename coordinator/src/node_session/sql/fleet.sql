-- The nodes' part of the ops snapshot. A row not seen for 90 s is a stream of a coordinator
-- that crashed (see connected.sql). $1 now (null: the database clock).
with clock as materialized (select coalesce($1::timestamptz, clock_timestamp()) as now)
select
    (select count(*) from node_session
      where disconnected_at is null and last_seen_at > clock.now - interval '90 seconds')
      as "nodes_connected!",
    -- A draining node takes no new jobs, so its free slots are not capacity (nor does a
    -- quarantined one's count: see below).
    (select coalesce(sum(free_slots), 0)::bigint from node_session
      where disconnected_at is null and last_seen_at > clock.now - interval '90 seconds'
        and not draining and not coalesce(quarantined_until > clock.now, false)) as "free_slots!",
    -- Quarantined nodes, connected or not (dropped.sql).
    (select count(*) from node_session where quarantined_until > clock.now)
      as "nodes_quarantined!"
from clock
