-- The outbox's figures of the ops snapshot, each from its partial index.
-- $1 now (null: the database clock).
with clock as materialized (select coalesce($1::timestamptz, clock_timestamp()) as now)
select
    (select count(*) from delivery where state in ('pending', 'delivering')) as "pending!",
    (select count(*) from delivery where state = 'dead') as "dead!",
    (select count(*) from delivery, clock
      where state = 'delivered' and delivered_at >= clock.now - interval '1 hour')
        as "delivered_last_hour!",
    (select min(created_at) from delivery where state in ('pending', 'delivering'))
        as oldest_pending,
    (select now from clock) as "now!"
