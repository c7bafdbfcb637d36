-- Lease one port of gateway $1 to node $2 for mall $3 (job $4; null for a warm-up) in ONE
-- statement: a FOR UPDATE SKIP LOCKED pick of the least recently used enabled port that
--   * is not leased (a lease past leased_until is free: a dead node never holds an IP),
--   * is not resting after its request budget (rest_until),
--   * is not cooling down for every mall (cooldown_until, after a proxy error),
--   * is not cooling down for THIS mall (proxy_port_cooldown, after a block),
-- then the UPDATE that leases it. Two acquirers can never get the same port: the second
-- skips the row the first has locked, and a row it reads from an older snapshot is
-- re-checked on its newest version when locked (READ COMMITTED re-evaluates the WHERE), so
-- a port leased a moment ago no longer qualifies.
--
-- NB: the pick reads every enabled port and sorts (a top-1 sort): there is deliberately no
-- index on last_used_at, so that this UPDATE and the release stay HOT (migration 0004).
--
-- When nothing is free the single row has no port, and next_free_at says when the first
-- port becomes usable for this mall if no lease is renewed (null: the gateway has no
-- enabled ports). It is only computed then (an InitPlan is evaluated on first use).
-- The port's use_count after the grant is the lease's id (its fencing token for release).
-- $5 lease TTL in ms, $6 now.
with
clock as materialized (select coalesce($6::timestamptz, clock_timestamp()) as now),
pick as materialized (
    select p.host, p.port
    from clock
    cross join lateral (
        select p.host, p.port
        from proxy_port p
        where p.enabled
          and p.host = $1::text
          and (p.leased_until is null or p.leased_until <= clock.now)
          and (p.rest_until is null or p.rest_until <= clock.now)
          and (p.cooldown_until is null or p.cooldown_until <= clock.now)
          and not exists (
              select 1 from proxy_port_cooldown c
              where c.host = p.host and c.port = p.port and c.mall = $3::text
                and c.cooldown_until > clock.now)
        order by p.last_used_at asc nulls first, p.host, p.port
        limit 1
        for update of p skip locked
    ) p
),
granted as (
    update proxy_port p set
        holder_node = $2::text,
        holder_job = $4::bigint,
        holder_mall = $3::text,
        leased_at = clock.now,
        leased_until = clock.now + $5::bigint * interval '1 millisecond',
        last_used_at = clock.now,
        use_count = p.use_count + 1
    from pick, clock
    where p.host = pick.host and p.port = pick.port
    returning p.host, p.port, p.leased_until, p.use_count
)
select g.host as "host?", g.port as "port?", g.leased_until as "leased_until?",
       g.use_count as "lease_id?",
       case when g.port is null then (
           select min(greatest(
                      clock.now, p.leased_until, p.rest_until, p.cooldown_until,
                      (select c.cooldown_until from proxy_port_cooldown c
                       where c.host = p.host and c.port = p.port and c.mall = $3::text)))
           from proxy_port p, clock
           where p.enabled and p.host = $1::text
       ) end as "next_free_at?"
from (values (1)) as one (x)
left join granted g on true
