-- Store alert rule $1's announcement to destination $2 (the alert webhook), body $3 (the
-- Slack-compatible message), due at once, in the caller's transaction: the evaluation that
-- recorded the rule's new state. $4 now (null: the database clock). Wakes the workers.
with
clock as materialized (select coalesce($4::timestamptz, clock_timestamp()) as now),
inserted as (
    insert into delivery (alert_rule, search_version, destination, next_attempt_at,
                          created_at, body)
    select $1::text, 0, $2::text, clock.now, clock.now, $3::text
    from clock
    returning delivery_id
),
notified as (
    select pg_notify('lps_delivery', '') from inserted
)
select (select delivery_id from inserted) as "delivery_id!",
       (select count(*) from notified) as "notified!"
