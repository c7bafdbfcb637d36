-- Register a mall or change its limits, and reconcile its slot rows with the cap: free
-- slots above the cap are removed, missing ones added (a held slot above a lowered cap is
-- never used again by the claim, which only takes slot_no <= max_running).
-- $1 mall, $2 enabled, $3 max_running (null: no cap), $4 min_start_gap_ms,
-- $5 spend_cap_hourly_usd (null: no cap).
with
m as (
    insert into mall (mall_id, enabled, max_running, min_start_gap_ms, spend_cap_hourly_usd)
    values ($1::text, $2::bool, $3::int, $4::int, $5::float8)
    on conflict (mall_id) do update
        set enabled = excluded.enabled, max_running = excluded.max_running,
            min_start_gap_ms = excluded.min_start_gap_ms,
            spend_cap_hourly_usd = excluded.spend_cap_hourly_usd, updated_at = now()
    returning mall_id, max_running
),
dropped as (
    delete from mall_slot s using m
    where s.mall_id = m.mall_id and s.job_id is null
      and (m.max_running is null or s.slot_no > m.max_running)
),
added as (
    insert into mall_slot (mall_id, slot_no)
    select m.mall_id, g from m, generate_series(1, coalesce(m.max_running, 0)) g
    on conflict do nothing
)
select mall_id as "mall_id!" from m
