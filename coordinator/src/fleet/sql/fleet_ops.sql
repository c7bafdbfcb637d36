-- The proxies' part of the ops snapshot, in one round trip (the nodes' part is
-- node_session/sql/fleet.sql). $1 now (null: the database clock).
with clock as materialized (select coalesce($1::timestamptz, clock_timestamp()) as now)
select
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
