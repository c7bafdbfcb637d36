-- Make the enabled ports exactly the configured ones: gateway $1, ports $2. New ports are
-- added, configured ports that were disabled are enabled again (with their history), and
-- every other enabled port (a removed port, or any port of another gateway host) is
-- disabled: kept for its history and its live lease, never granted again.
-- NB: runs after pg_advisory_xact_lock in the same transaction (see Ledger::reconcile), so
-- coordinators starting together apply their configurations one after the other instead
-- of deadlocking on each other's inserts and updates.
with
cfg as (select $1::text as host, p.port from unnest($2::int[]) as p (port)),
added as (
    insert into proxy_port (host, port)
    select cfg.host, cfg.port from cfg order by cfg.port
    on conflict (host, port) do nothing
    returning port
),
enabled as (
    update proxy_port p set enabled = true
    from cfg
    where p.host = cfg.host and p.port = cfg.port and not p.enabled
    returning p.port
),
disabled as (
    update proxy_port p set enabled = false
    where p.enabled and not (p.host = $1::text and p.port = any($2::int[]))
    returning p.port
)
select (select count(*) from added) as "added!",
       (select count(*) from enabled) as "enabled!",
       (select count(*) from disabled) as "disabled!"
