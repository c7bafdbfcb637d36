-- The nodes' and proxies' part of the ops snapshot, in one round trip.
-- $1 now (null: the database clock).
with clock as materialized (select coalesce($1::timestamptz, clock_timestamp()) as now)
select
    -- A row not seen for 90 s is a stream of a coordinator that crashed (see nodes.sql).
    (select count(*) from node_session
      where disconnected_at is null and last_seen_at > clock.now - interval '90 seconds')
      as "nodes_connected!",
    -- A draining node takes no new jobs, so its free slots are not capacity.
    (select coalesce(sum(free_slots), 0)::bigint from node_session
      where disconnected_at is null and last_seen_at > clock.now - interval '90 seconds'
        and not draining) as "free_slots!",
    (select count(*) from proxy_port where enabled) as "ports_total!",
    (select count(*) from proxy_port p
      where p.enabled
        and (p.leased_until is null or p.leased_until <= clock.now)
        and (p.rest_until is null or p.rest_until <= clock.now)
        and (p.cooldown_until is null or p.cooldown_until <= clock.now)) as "ports_available!",
    (select count(*) from bot_detection
      where detected_at > clock.now - interval '1 hour') as "blocks_last_hour!",
    (select count(*) from ip_session
      where end_reason = 'block' and ended_at > clock.now - interval '6 hours')
      as "block_ended_sessions_6h!"
from clock
