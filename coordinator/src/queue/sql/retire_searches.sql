-- Retention: one batch of searches created before the age ($1 ms) that are final (no
-- item's job is queued or running), have no undelivered delivery event and are no
-- schedule's current run (migration 0021), deleted with
-- their items and delivered events (on delete cascade); their
-- price-history entries stay, with search_id set null. The batch scans the next $2
-- searches in (created_at, search_id) order after the cursor ($3, $4) — an ordered index
-- read that stops at the limit — and deletes those of them that may go; rows another
-- transaction holds are skipped (the next sweep takes them). Returns the rows deleted,
-- the rows scanned and the last scanned key (the next cursor).
-- NB: `offset 0` keeps each NOT EXISTS a per-row subplan on its index: under the
-- connection's generic plans the planner otherwise hashed the whole table for an anti-join
-- in every batch.
with scanned as (
    select s.search_id, s.created_at
    from search_request s
    where s.created_at < now() - $1::bigint * interval '1 millisecond'
      and (s.created_at, s.search_id) > ($3::timestamptz, $4::bigint)
    order by s.created_at, s.search_id
    limit $2
),
victims as (
    select s.search_id
    from search_request s
    where s.search_id = any(array(select search_id from scanned))
      and not exists (
          select 1
          from search_item si
          join job j on j.job_id = si.job_id
          where si.search_id = s.search_id and j.state in ('queued', 'running')
          offset 0)
      -- An event not yet delivered (pending, being tried, dead until an operator retries
      -- it) keeps its search: the delivery goes with it (on delete cascade).
      and not exists (
          select 1 from delivery d
          where d.search_id = s.search_id and d.state <> 'delivered'
          offset 0)
      -- A schedule's current (or last) run keeps its search: its evaluation reads it once
      -- it is final (the observations it compares with are the schedule's own rows).
      and not exists (
          select 1 from schedule sc where sc.last_search_id = s.search_id offset 0)
    for update of s skip locked
),
deleted as (
    delete from search_request s
    where s.search_id = any(array(select search_id from victims))
    returning s.search_id
)
select (select count(*) from deleted) as "deleted!",
       (select count(*) from scanned) as "scanned!",
       (select max(created_at) from scanned) as last_at,
       (select search_id from scanned order by created_at desc, search_id desc limit 1) as last_id
