-- Claim queued jobs for a batch of requests in ONE statement (request k: node $1[k] wants at
-- most $3[k] jobs; each request gets its first job before any gets a second, in request
-- order), honouring per-mall politeness:
--
-- * gap: a mall with min_start_gap_ms > 0 starts at most one job per gap. Its mall row is
--   locked FOR UPDATE SKIP LOCKED (a claimer that finds it locked skips the mall: another
--   claimer is starting a job of it right now) and re-checked on the newest row version, so
--   two claimers can never both pass the gap check;
-- * cap: a capped mall's running jobs each hold one mall_slot row. A free slot is taken
--   FOR UPDATE SKIP LOCKED, so the cap holds across any number of claimers and replicas;
-- * order: priority, then run_after, then id: the order of index job_claim_order.
-- * ports: no more running jobs for a mall (and in all) than proxy ports it can use (see
--   port_room);
-- * spend: no job at all while the deployment's spend over the last hour has reached $6 (USD;
--   null: no cap), and none of a mall whose own spend has reached its
--   spend_cap_hourly_usd. Spend is read from spend_minute (at most 60 buckets a mall), so
--   the caps hold across replicas without summing job_attempt. A capped job stays queued,
--   untouched, until the hour frees up.
--
-- Every claim increments lease_epoch (the fencing token). The lease never outlives the
-- hard deadline. $2 malls the nodes serve (null: all), $4 lease TTL in ms, $5 now, $7 the
-- port wait in ms (see port_room).
--
-- NB: the clock is clock_timestamp(), read during execution, i.e. after this statement's
-- snapshot: a claim that sees a slot freed by a completion records a start later than that
-- completion's finish, so the recorded run intervals themselves obey the cap and the gap.
-- now() (the transaction start) can precede the snapshot by the planning time.
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
-- Malls under their own spend cap (the cap's sum is read only for a capped mall).
unspent as materialized (
    select m.mall_id
    from mall m, clock
    where m.enabled
      and ($2::text[] is null or m.mall_id = any($2::text[]))
      and (select open from budget)
      and (m.spend_cap_hourly_usd is null
           or coalesce((select sum(s.cost_usd) from spend_minute s
                        where s.mall = m.mall_id and s.minute > clock.now - interval '1 hour'), 0)
              < m.spend_cap_hourly_usd)
),
gap_malls as materialized (
    select m.mall_id
    from mall m, clock
    where m.enabled
      and m.mall_id in (select mall_id from unspent)
      and m.min_start_gap_ms > 0
      and (m.last_start_at is null
           or m.last_start_at <= clock.now - m.min_start_gap_ms * interval '1 millisecond')
    order by m.mall_id
    for update of m skip locked
),
eligible as materialized (
    select m.mall_id, m.max_running, m.min_start_gap_ms > 0 as gapped
    from mall m
    where m.enabled
      and m.mall_id in (select mall_id from unspent)
      and (m.min_start_gap_ms = 0 or m.mall_id in (select mall_id from gap_malls))
),
cand as materialized (
    select c.job_id, c.mall, c.priority, c.run_after,
           row_number() over (partition by c.mall order by c.priority, c.run_after, c.job_id) as rn
    from eligible e, clock
    cross join lateral (
        select j.job_id, j.mall, j.priority, j.run_after
        from job j
        where j.state = 'queued' and j.mall = e.mall_id and j.run_after <= clock.now
        order by j.priority, j.run_after, j.job_id
        limit greatest(0, least(
            case when e.gapped then 1 else (select count(*) from wanted) end,
            coalesce((select r.room from port_room r where r.mall_id = e.mall_id),
                     (select count(*) from wanted))))
        for update of j skip locked
    ) c
),
slots as materialized (
    select s.mall_id, s.slot_no,
           row_number() over (partition by s.mall_id order by s.slot_no) as rn
    from eligible e
    cross join lateral (
        select ms.mall_id, ms.slot_no
        from mall_slot ms
        where e.max_running is not null
          and ms.mall_id = e.mall_id
          and ms.slot_no <= e.max_running
          and ms.job_id is null
        order by ms.slot_no
        limit (select count(*) from cand where cand.mall = e.mall_id)
        for update of ms skip locked
    ) s
),
picked as materialized (
    select c.job_id, c.mall, s.slot_no,
           row_number() over (order by c.priority, c.run_after, c.job_id) as slot
    from cand c
    join eligible e on e.mall_id = c.mall
    left join slots s on s.mall_id = c.mall and s.rn = c.rn
    where e.max_running is null or s.slot_no is not null
    order by c.priority, c.run_after, c.job_id
    limit greatest(0, least((select count(*) from wanted),
                            coalesce((select room from total_room), (select count(*) from wanted))))
),
took_slots as (
    update mall_slot ms set job_id = p.job_id
    from picked p
    where ms.mall_id = p.mall and ms.slot_no = p.slot_no
),
stamped as (
    update mall m set last_start_at = clock.now
    from clock
    where m.mall_id in (select p.mall from picked p) and m.min_start_gap_ms > 0
)
update job j set
    state = 'running',
    lease_epoch = j.lease_epoch + 1,
    change_seq = nextval('job_change_seq'),
    slot_no = p.slot_no,
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
