-- Extend the leases node $2 holds on ports $3 of gateway $1 (its heartbeat). Only live
-- leases are renewed: an expired one may already be someone else's, and if not, it is free
-- and the node must acquire again. The ports that do not come back are lost.
-- With $6 (a reconnecting node re-attaching its ports) an expired lease is renewed too
-- while the node is still its holder: nobody acquired the port since (an acquire makes
-- itself the holder, a release or a lost node's release clears it).
-- $4 lease TTL in ms, $5 now.
with clock as materialized (select coalesce($5::timestamptz, clock_timestamp()) as now)
update proxy_port p set
    leased_until = clock.now + $4::bigint * interval '1 millisecond'
from clock
where p.host = $1::text
  and p.port = any($3::int[])
  and p.holder_node = $2::text
  and (p.leased_until > clock.now or $6::bool)
returning p.port, p.leased_until as "leased_until!"
