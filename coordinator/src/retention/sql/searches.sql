-- Retention: a batch of searches created before the age ($1 ms) that are final (no item's
-- job is queued or running), with their items (on delete cascade); their price-history
-- entries stay, with search_id set null. Key-range batches in (created_at, search_id)
-- order after the cursor ($3, $4), at most $2 rows; rows another transaction holds are
-- skipped (the next sweep takes them).
with victims as (
    select s.search_id, s.created_at
    from search_request s
    where s.created_at < now() - $1::bigint * interval '1 millisecond'
      and (s.created_at, s.search_id) > ($3::timestamptz, $4::bigint)
      and not exists (
          select 1
          from search_item si
          join job j on j.job_id = si.job_id
          where si.search_id = s.search_id and j.state in ('queued', 'running'))
    order by s.created_at, s.search_id
    limit $2
    for update of s skip locked
),
deleted as (
    delete from search_request s
    using victims v
    where s.search_id = v.search_id
    returning s.search_id as id, s.created_at as at
)
select count(*) as "deleted!",
       max(at) as last_at,
       (array_agg(id order by at desc, id desc))[1] as last_id
from deleted
