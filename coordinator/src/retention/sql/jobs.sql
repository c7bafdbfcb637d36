-- Retention: a batch of jobs finished before the age ($1 ms), with their attempts (and
-- page evidence), offers, stale reports and negative-cache rows (on delete cascade).
-- A finished job stays while
-- * a search refers to it (search_item has no cascade: searches go first, by their rule),
-- * it is the newest found result of its product and mall, which a Search with any
--   max_age answers from (a newer one must have finished over a minute ago, so a Search
--   that read this one as the newest has committed its item first),
-- * its verified "not found" is still cached (or expired within the last minute).
-- Queued and running jobs are never taken. Key-range batches in (finished_at, job_id)
-- order after the cursor ($3, $4), at most $2 rows, skipping rows others hold: a claim
-- never waits for a sweep (it locks only queued jobs, which this never reads).
with victims as (
    select j.job_id, j.finished_at
    from job j
    where j.finished_at < now() - $1::bigint * interval '1 millisecond'
      and (j.finished_at, j.job_id) > ($3::timestamptz, $4::bigint)
      and j.state in ('done', 'dead', 'cancelled')
      and not exists (select 1 from search_item si where si.job_id = j.job_id)
      and (j.outcome is distinct from 'found' or exists (
          select 1 from job n
          where n.dedupe_key = j.dedupe_key and n.outcome = 'found'
            and n.finished_at > j.finished_at
            and n.finished_at < now() - interval '1 minute'))
      and not exists (
          select 1 from negative_cache nc
          where nc.job_id = j.job_id and nc.expires_at > now() - interval '1 minute')
    order by j.finished_at, j.job_id
    limit $2
    for update of j skip locked
),
deleted as (
    delete from job j
    using victims v
    where j.job_id = v.job_id
    returning j.job_id as id, j.finished_at as at
)
select count(*) as "deleted!",
       max(at) as last_at,
       (array_agg(id order by at desc, id desc))[1] as last_id
from deleted
