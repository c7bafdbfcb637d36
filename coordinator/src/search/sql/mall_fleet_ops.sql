-- Per-mall block and cooldown figures for the ops snapshot. A port cools for a mall when it
-- cools for every mall or has a running per-mall cooldown for it.
-- $1 now (null: the database clock).
with clock as materialized (select coalesce($1::timestamptz, clock_timestamp()) as now)
select
    m.mall_id as "mall!",
    (select count(*) from bot_detection b
      where b.mall = m.mall_id and b.detected_at > clock.now - interval '1 hour')
      as "blocks_last_hour!",
    (select count(*) from proxy_port p
      where p.enabled
        and (p.cooldown_until > clock.now
             or exists (select 1 from proxy_port_cooldown c
                         where c.host = p.host and c.port = p.port and c.mall = m.mall_id
                           and c.cooldown_until > clock.now))) as "ports_cooling!"
from mall m, clock
order by m.mall_id
