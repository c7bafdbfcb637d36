-- Connected nodes (a closed stream in its grace period is not listed) with the jobs they
-- run. A stream's row is refreshed at least every 30 s plus a heartbeat; one not seen for
-- 90 s belongs to a coordinator that crashed (it could not mark it disconnected) and is
-- not connected.
select
    n.node_id, n.session_id, n.coordinator_id, n.version, n.slots, n.free_slots, n.malls,
    n.connected_at, n.last_seen_at, n.draining,
    case when n.quarantined_until > now() then n.quarantined_until end as quarantined_until,
    case when n.quarantined_until > now() then n.quarantine_reason end as quarantine_reason,
    coalesce(
        (select array_agg(j.job_id order by j.job_id)
           from job j where j.node_id = n.node_id and j.state = 'running'),
        '{}') as "running_jobs!: Vec<i64>"
from node_session n
where n.disconnected_at is null and n.last_seen_at > now() - interval '90 seconds'
order by n.node_id
