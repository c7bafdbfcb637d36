-- The ledger's part of the ops snapshot, in one round trip. Every enabled port is in
-- exactly one state, by precedence: leased (a live lease), cooling (for every mall),
-- resting, available. Per-mall cooldowns are counted separately (mall_cooling.sql): a port
-- cooling for one mall is available for the others. $1 now.
with
clock as materialized (select coalesce($1::timestamptz, clock_timestamp()) as now),
ports as (
    select case
               when p.leased_until > clock.now then 'leased'
               when p.cooldown_until > clock.now then 'cooling'
               when p.rest_until > clock.now then 'resting'
               else 'available'
           end as state
    from proxy_port p, clock
    where p.enabled
)
select
    (select count(*) from ports) as "total!",
    (select count(*) from ports where state = 'available') as "available!",
    (select count(*) from ports where state = 'leased') as "leased!",
    (select count(*) from ports where state = 'resting') as "resting!",
    (select count(*) from ports where state = 'cooling') as "cooling!",
    (select count(*) from ip_session s
       where s.end_reason = 'block' and s.ended_at > clock.now - interval '6 hours')
       as "block_sessions_6h!",
    (select count(*) from bot_detection b
       where b.detected_at > clock.now - interval '1 hour') as "bot_detections_1h!"
from clock
