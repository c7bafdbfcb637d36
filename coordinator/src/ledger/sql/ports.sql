-- Every port the ledger knows (enabled or not) with its state (the precedence of ops.sql;
-- `disabled` first) and its live per-mall cooldowns. $1 now.
with clock as materialized (select coalesce($1::timestamptz, clock_timestamp()) as now)
select p.host, p.port, p.enabled,
       case
           when not p.enabled then 'disabled'
           when p.leased_until > clock.now then 'leased'
           when p.cooldown_until > clock.now then 'cooling'
           when p.rest_until > clock.now then 'resting'
           else 'available'
       end as "state!",
       p.holder_node, p.holder_job, p.holder_mall, p.leased_at, p.leased_until,
       p.rest_until, p.cooldown_until, p.last_used_at, p.use_count, p.burn_count,
       p.last_reason as "last_reason: SessionEndReason",
       coalesce(mc.malls, '{}') as "cooling_malls!",
       coalesce(mc.untils, '{}') as "cooling_until!"
from proxy_port p
cross join clock
left join lateral (
    select array_agg(c.mall order by c.mall) as malls,
           array_agg(c.cooldown_until order by c.mall) as untils
    from proxy_port_cooldown c
    where c.host = p.host and c.port = p.port and c.cooldown_until > clock.now
) mc on true
order by p.host, p.port
