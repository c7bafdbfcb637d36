-- Node $1 dropped $2 (> 0) of its jobs (its stream was lost and the grace release took them
-- back, or its Hello no longer listed them). One drop is counted per such event within a
-- window of $3 ms (a drop after the window starts a new one); the $4th drop within a
-- window quarantines the node: no new assignments for $5 ms doubled per earlier
-- quarantine (at most 16 times), its drop count starting over. A quarantine is forgotten
-- once a window passed after it without a drop. $6 now (null: the database clock).
-- Returns the node's quarantine (null: none) and its drops in the window.
with clock as materialized (select coalesce($6::timestamptz, clock_timestamp()) as now),
counted as (
    select n.node_id,
           case when n.drops_since > clock.now - $3::bigint * interval '1 millisecond'
                then n.drops + 1 else 1 end as drops,
           case when n.drops_since > clock.now - $3::bigint * interval '1 millisecond'
                then n.drops_since else clock.now end as drops_since,
           case when n.quarantined_until is not null
                     and n.quarantined_until > clock.now - $3::bigint * interval '1 millisecond'
                then n.quarantines else 0 end as quarantines
    from node_session n, clock
    where n.node_id = $1
    for update of n
)
update node_session n set
    drops = case when c.drops >= $4::int then 0 else c.drops end,
    drops_since = c.drops_since,
    quarantines = case when c.drops >= $4::int then c.quarantines + 1 else c.quarantines end,
    quarantined_until = case when c.drops >= $4::int
        then clock.now + $5::bigint * power(2, least(c.quarantines, 4)) * interval '1 millisecond'
        else n.quarantined_until end,
    quarantine_reason = case when c.drops >= $4::int
        then 'dropped its jobs ' || c.drops || ' times within '
             || ($3::bigint / 1000) || ' s (last: ' || $2::int || ' jobs)'
        else n.quarantine_reason end
from counted c, clock
where n.node_id = c.node_id
returning n.quarantined_until, c.drops as "drops!"
