-- Fail the attempt of lease ($1 job_id, $2 lease_epoch) held by node $10. A retryable class with attempts
-- left goes back to `queued` after a backoff of min(cap, base * 2^(attempts-1)) with
-- jitter (uniform in [50 %, 100 %] of that); otherwise the job is `dead` with the class
-- and message (a class that is not retryable, such as `layout` or `page_blocked`, is dead
-- after this one attempt whatever attempts are left). A lease that is no longer current
-- changes nothing (stale_report).
--
-- $3 error class, $4 retryable, $5 message, $6 backoff base ms, $7 backoff cap ms,
-- $8 bytes, $9 cost_usd, $10 node_id, $11 now, $12 the page evidence (PageEvidence as
-- JSON, null: none). The attempt row is inserted without spend:
-- spend.sql records the report's bytes and cost on it next (on a lost lease's attempt too).
-- `(j.state = 'running') is true` means `j.state = 'running'`; the form makes the planner look
-- the job up by its key (see complete.sql).
with
clock as materialized (select coalesce($11::timestamptz, clock_timestamp()) as now),
failed as (
    update job j set
        attempts = j.attempts + 1,
        state = case when $4::bool and j.attempts + 1 < j.max_attempts
                     then 'queued' else 'dead' end::job_state,
        run_after = case when $4::bool and j.attempts + 1 < j.max_attempts
                         then clock.now + least($7::float8, $6::float8 * power(2, j.attempts))
                                          * (0.5 + random() * 0.5) * interval '1 millisecond'
                         else j.run_after end,
        finished_at = case when $4::bool and j.attempts + 1 < j.max_attempts
                           then null else clock.now end,
        error_class = $3::error_class,
        last_error = left($5::text, 2000),
        node_id = null,
        lease_until = null,
        bytes = j.bytes + $8::bigint,
        cost_usd = j.cost_usd + $9::float8
    from clock
    where j.job_id = $1::bigint and (j.state = 'running') is true and j.lease_epoch = $2::bigint
      and j.node_id = $10::text
    returning j.job_id, j.lease_epoch, j.mall, j.state, j.attempts, j.run_after,
              j.run_started_at
),
attempt as (
    insert into job_attempt (job_id, lease_epoch, node_id, started_at, ended_at, ended,
                             error_class, error, evidence)
    select f.job_id, f.lease_epoch, $10::text, f.run_started_at, clock.now, 'failed',
           $3::error_class, left($5::text, 2000), $12::jsonb
    from failed f, clock
),
stale as (
    insert into stale_report (job_id, lease_epoch, node_id, kind, received_at)
    select $1::bigint, $2::bigint, $10::text, 'failure', clock.now
    from clock
    where not exists (select 1 from failed)
      and exists (select 1 from job j where j.job_id = $1::bigint)
)
select f.mall, f.state as "state: JobState", f.attempts, f.run_after from failed f
