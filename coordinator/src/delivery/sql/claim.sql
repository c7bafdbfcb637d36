-- Claim at most $2 due deliveries for worker $1: pending ones whose time has come, and
-- claimed ones whose claim expired (their worker died or lost the database), oldest due
-- first. FOR UPDATE SKIP LOCKED inside the UPDATE: replicas claiming at once take
-- different rows, never the same one twice. Each claim is an attempt (`attempts + 1`,
-- also the claim's fencing token) and lasts $3 ms. Only rows of destinations this worker
-- knows ($5): a replica whose configuration lacks one (a rollout adding it) leaves its
-- events to the replicas that have it instead of spending their attempts.
-- $1 worker, $2 how many, $3 claim length (ms), $4 now (null: the database clock),
-- $5 the worker's destinations. An alert's row (alert_rule set, no search) is one of the
-- destination the worker gives for the alert webhook.
with
clock as materialized (select coalesce($4::timestamptz, clock_timestamp()) as now),
due as materialized (
    select d.delivery_id
    from delivery d, clock
    where d.state in ('pending', 'delivering') and d.next_attempt_at <= clock.now
      and d.destination = any($5::text[])
    order by d.next_attempt_at, d.delivery_id
    limit $2
    for update of d skip locked
)
update delivery d set
    state = 'delivering',
    claimed_by = $1::text,
    attempts = d.attempts + 1,
    last_attempt_at = clock.now,
    next_attempt_at = clock.now + $3::bigint * interval '1 millisecond'
from due, clock
where d.delivery_id = due.delivery_id
returning d.delivery_id, d.event_id, d.search_id, d.product_index, d.search_version,
          d.destination, d.attempts, d.created_at, d.body, d.alert_rule
