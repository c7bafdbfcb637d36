-- Enabled proxy ports with their state at $1 (null: the database clock): leased beats
-- cooling (for every mall) beats resting beats available. Per-mall cooldowns that are
-- still running are listed; they do not change the state (the port serves other malls).
with clock as materialized (select coalesce($1::timestamptz, clock_timestamp()) as now)
select
    p.host, p.port, p.holder_node, p.leased_until, p.rest_until, p.cooldown_until,
    p.last_used_at, p.use_count, p.burn_count, p.last_reason::text as last_reason,
    case
        when p.leased_until > clock.now then 'leased'
        when p.cooldown_until > clock.now then 'cooling'
        when p.rest_until > clock.now then 'resting'
        else 'available'
    end as "state!",
    coalesce(
        (select array_agg(c.mall order by c.mall)
           from proxy_port_cooldown c
          where c.host = p.host and c.port = p.port and c.cooldown_until > clock.now),
        '{}') as "cooling_malls!: Vec<String>"
from proxy_port p, clock
where p.enabled
order by p.host, p.port
