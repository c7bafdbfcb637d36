-- RetryDead: dead jobs back to `queued` with fresh attempts, runnable now, and a NOTIFY per
-- mall to wake claimers. Per dedupe key only the newest dead job is retried, and none
-- whose key already has an active job (the partial unique index job_active_dedupe_key
-- allows one); such jobs are skipped, not errors.
-- NB: an enqueue committing an active job for the same key between this statement's
-- snapshot and its update makes it fail with a unique violation; the caller retries.
-- $1 job ids (null: any), $2 mall (null: any), $3 dead since (null: any),
-- $4 now (null: the database clock), $5 the NOTIFY channel.
with
clock as materialized (select coalesce($4::timestamptz, clock_timestamp()) as now),
pick as (
    select distinct on (j.dedupe_key) j.job_id
    from job j
    where j.state = 'dead'
      and ($1::bigint[] is null or j.job_id = any($1::bigint[]))
      and ($2::text is null or j.mall = $2::text)
      and ($3::timestamptz is null or j.finished_at >= $3::timestamptz)
      and not exists (
          select 1 from job a
          where a.dedupe_key = j.dedupe_key and a.state in ('queued', 'running'))
    order by j.dedupe_key, j.finished_at desc, j.job_id desc
),
requeued as (
    update job j set
        state = 'queued',
        attempts = 0,
        reclaims = 0,
        ip_burns = 0,
        run_after = clock.now,
        finished_at = null,
        error_class = null,
        last_error = null
    from pick, clock
    where j.job_id = pick.job_id and j.state = 'dead'
    returning j.job_id, j.mall
),
notified as (
    select pg_notify($5::text, m.mall) from (select distinct mall from requeued) m
)
select
    coalesce((select array_agg(job_id order by job_id) from requeued), '{}') as "job_ids!: Vec<i64>",
    (select count(*) from notified) as "notified!"
