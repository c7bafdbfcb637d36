-- Per-mall block and proxy-port figures for the ops snapshot, every mall (enabled or not).
-- A port cools for a mall when it cools for every mall or has a running per-mall cooldown
-- for it (proxy_port_cooldown, after a block). A port is available for a mall on exactly
-- the terms of the ledger's acquire (ledger/sql/acquire.sql): enabled, not leased, not
-- resting, not cooling for every mall and not cooling for this mall — so a mall whose
-- every exit IP is cooling after blocks reads 0 even while the ports serve other malls.
-- $1 now (null: the database clock).
with clock as materialized (select coalesce($1::timestamptz, clock_timestamp()) as now)
select
    m.mall_id as "mall!",
    m.enabled as "enabled!",
    (select count(*) from bot_detection b
      where b.mall = m.mall_id and b.detected_at > clock.now - interval '1 hour')
      as "blocks_last_hour!",
    (select count(*) from proxy_port p
      where p.enabled
        and (p.cooldown_until > clock.now
             or exists (select 1 from proxy_port_cooldown c
                         where c.host = p.host and c.port = p.port and c.mall = m.mall_id
                           and c.cooldown_until > clock.now))) as "ports_cooling!",
    (select count(*) from proxy_port p
      where p.enabled
        and (p.leased_until is null or p.leased_until <= clock.now)
        and (p.rest_until is null or p.rest_until <= clock.now)
        and (p.cooldown_until is null or p.cooldown_until <= clock.now)
        and not exists (select 1 from proxy_port_cooldown c
                         where c.host = p.host and c.port = p.port and c.mall = m.mall_id
                           and c.cooldown_until > clock.now)) as "ports_available!"
from mall m, clock
order by m.mall_id
