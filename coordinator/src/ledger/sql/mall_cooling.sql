-- Enabled ports cooling down per mall (after mall-specific blocks). $1 now.
with clock as materialized (select coalesce($1::timestamptz, clock_timestamp()) as now)
select c.mall, count(*) as "ports!"
from proxy_port_cooldown c
join proxy_port p on p.host = c.host and p.port = c.port
cross join clock
where p.enabled and c.cooldown_until > clock.now
group by c.mall
order by c.mall
