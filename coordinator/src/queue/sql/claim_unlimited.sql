-- Claim queued jobs for a batch of requests (request k: node $1[k] wants $3[k] jobs) of
-- malls WITHOUT a concurrency cap or a start gap: claim.sql without its mall_slot and
-- start-gap steps (a third fewer statement nodes and two fewer table updates per claim;
-- queue-bench measures the difference). A mall that has a limit is skipped here whatever
-- the caller believed, so this statement can never break a limit; Queue uses claim.sql
-- whenever a mall it claims for may have one. Same requests, order, fencing, lease and
-- returned columns as claim.sql, and the same spend caps ($6 the deployment's, USD per hour;
-- null: none; and each mall's spend_cap_hourly_usd), and the same proxy-port room.
--
-- $2 malls the nodes serve (null: all), $4 lease TTL in ms, $5 now, $7 the port wait in ms.
with
clock as materialized (select coalesce($5::timestamptz, clock_timestamp()) as now),
wanted as materialized (
    select w.node_id, w.req, row_number() over (order by g.k, w.req) as slot
    from unnest($1::text[], $3::int[]) with ordinality as w (node_id, n, req)
    cross join lateral generate_series(1, w.n) as g (k)
),
budget as materialized (
    select $6::float8 is null
           or coalesce((select sum(s.cost_usd) from spend_minute s, clock
                        where s.minute > clock.now - interval '1 hour'), 0) < $6::float8 as open
),
-- Proxy ports (DESIGN §4): with a ledger (any enabled port), a mall runs at most as many
-- jobs as it has ports not cooling for it, and the deployment at most as many as it has
-- ports not cooling at all: a running job holds one port at a time, so a job beyond that
-- would only sit on a node slot waiting for one. Replicas claiming at the same moment can
-- overshoot by a claim; such a job waits or is handed back, never charged. A port resting
-- after its budget counts only when its rest ends within $7 ms (the claim's port wait): a
-- job that would wait longer for a port stays queued, uncharged, rather than take a node
-- slot to sleep in. (The ports are read once a claim; a mall's own cooldowns are the few
-- rows it has in proxy_port_cooldown.)
ports as materialized (
    select count(*) as enabled,
           count(*) filter (where (p.cooldown_until is null or p.cooldown_until <= clock.now)
                              and (p.rest_until is null or p.rest_until <= clock.now + $7::bigint * interval '1 millisecond')) as usable
    from proxy_port p, clock
    where p.enabled
),
running as materialized (
    select r.mall, count(*) as n from job r where r.state = 'running' group by r.mall
),
port_room as materialized (
    select m.mall_id,
           ports.usable
           - (select count(*) from proxy_port_cooldown c
               join proxy_port p on p.host = c.host and p.port = c.port
              where c.mall = m.mall_id and c.cooldown_until > clock.now and p.enabled
                and (p.cooldown_until is null or p.cooldown_until <= clock.now)
                and (p.rest_until is null or p.rest_until <= clock.now + $7::bigint * interval '1 millisecond'))
           - coalesce((select n from running where running.mall = m.mall_id), 0) as room
    from mall m, clock, ports
    where ports.enabled > 0
),
total_room as materialized (
    select case when ports.enabled = 0 then null
                else ports.usable - coalesce((select sum(n) from running), 0) end as room
    from ports
),
picked as materialized (
    select c.job_id, row_number() over (order by c.priority, c.run_after, c.job_id) as slot
    from mall m, clock
    cross join lateral (
        select j.job_id, j.priority, j.run_after
        from job j
        where j.state = 'queued' and j.mall = m.mall_id and j.run_after <= clock.now
        order by j.priority, j.run_after, j.job_id
        limit greatest(0, least((select count(*) from wanted),
                                coalesce((select r.room from port_room r where r.mall_id = m.mall_id),
                                         (select count(*) from wanted))))
        for update of j skip locked
    ) c
    where m.enabled
      and m.max_running is null
      and m.min_start_gap_ms = 0
      and ($2::text[] is null or m.mall_id = any($2::text[]))
      and (select open from budget)
      and (m.spend_cap_hourly_usd is null
           or coalesce((select sum(s.cost_usd) from spend_minute s
                        where s.mall = m.mall_id and s.minute > clock.now - interval '1 hour'), 0)
              < m.spend_cap_hourly_usd)
    order by c.priority, c.run_after, c.job_id
    limit greatest(0, least((select count(*) from wanted),
                            coalesce((select room from total_room), (select count(*) from wanted))))
)
update job j set
    state = 'running',
    lease_epoch = j.lease_epoch + 1,
    change_seq = nextval('job_change_seq'),
    slot_no = null,
    node_id = w.node_id,
    run_started_at = clock.now,
    deadline_at = clock.now + j.run_timeout_ms * interval '1 millisecond',
    lease_until = clock.now + least($4::bigint, j.run_timeout_ms) * interval '1 millisecond'
from picked p join wanted w using (slot), clock
where j.job_id = p.job_id
returning w.req as "req!", j.job_id, j.lease_epoch, j.mall, j.product_code, j.product_name,
          j.product_brand, j.product_model_code, j.product_gtin, j.priority,
          j.attempts, j.max_attempts, j.reclaims, j.created_at, j.run_started_at as "run_started_at!",
          j.deadline_at as "deadline_at!", j.lease_until as "lease_until!", j.traceparent, j.tracestate
