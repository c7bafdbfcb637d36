-- Retention: one batch of jobs finished before the age ($1 ms), deleted with their
-- attempts (and page evidence), offers, stale reports and negative-cache rows (on delete
-- cascade). A finished job stays while
-- * a search refers to it (search_item has no cascade: searches go first, by their rule),
-- * it is the newest found result of its product and mall, which a Search with any
--   max_age answers from (a newer one must have finished over a minute ago, so a Search
--   that read this one as the newest has committed its item first),
-- * its verified "not found" is still cached (or expired within the last minute).
-- Queued and running jobs are never taken. The batch scans the next $2 finished jobs in
-- (finished_at, job_id) order after the cursor ($3, $4) — an ordered read of the index
-- job_finished_at that stops at the limit — and deletes those that may go, skipping rows
-- others hold: a claim never waits for a sweep (it locks only queued jobs, which this
-- never reads). Returns the rows deleted, the rows scanned and the last scanned key.
-- NB: `offset 0` keeps each NOT EXISTS a per-row subplan on its index: under the
-- connection's generic plans the planner otherwise hashed all of search_item for an
-- anti-join in every batch.
with scanned as (
    select j.job_id, j.finished_at
    from job j
    where j.finished_at < now() - $1::bigint * interval '1 millisecond'
      and (j.finished_at, j.job_id) > ($3::timestamptz, $4::bigint)
    order by j.finished_at, j.job_id
    limit $2
),
victims as (
    select j.job_id
    from job j
    where j.job_id = any(array(select job_id from scanned))
      and j.state in ('done', 'dead', 'cancelled')
      and not exists (select 1 from search_item si where si.job_id = j.job_id offset 0)
      and (j.outcome is distinct from 'found' or exists (
          select 1 from job n
          where n.dedupe_key = j.dedupe_key and n.outcome = 'found'
            and n.finished_at > j.finished_at
            and n.finished_at < now() - interval '1 minute'
          offset 0))
      and not exists (
          select 1 from negative_cache nc
          where nc.job_id = j.job_id and nc.expires_at > now() - interval '1 minute'
          offset 0)
    for update of j skip locked
),
deleted as (
    delete from job j
    where j.job_id = any(array(select job_id from victims))
    returning j.job_id
)
select (select count(*) from deleted) as "deleted!",
       (select count(*) from scanned) as "scanned!",
       (select max(finished_at) from scanned) as last_at,
       (select job_id from scanned order by finished_at desc, job_id desc limit 1) as last_id
