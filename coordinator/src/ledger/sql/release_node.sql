-- Release every port node $1 holds (its stream is gone and its grace period is over), with
-- reason `shutdown`; no rest, no cooldown. No ip_session row is written: the node never
-- reported the sessions, so their figures are unknown (a row of zeros would skew advise).
-- $2 (optional) the stream session that was lost: release only while that session is
-- still the node's latest and disconnected (a node that reconnected keeps its ports).
-- $3 now. Returns each port with the job and mall it was held for.
with
clock as materialized (select coalesce($3::timestamptz, clock_timestamp()) as now),
held as materialized (
    select p.host, p.port, p.holder_job, p.holder_mall
    from proxy_port p
    where p.holder_node = $1::text
      and ($2::uuid is null or exists (
          select 1 from node_session s
          where s.node_id = $1::text and s.session_id = $2::uuid and s.disconnected_at is not null))
    order by p.host, p.port
    for update of p
),
released as (
    update proxy_port p set
        holder_node = null,
        holder_job = null,
        holder_mall = null,
        leased_at = null,
        leased_until = null,
        last_used_at = clock.now,
        last_reason = 'shutdown'
    from held h, clock
    where p.host = h.host and p.port = h.port and p.holder_node = $1::text
    returning p.host, p.port
)
select h.port, h.holder_job, h.holder_mall
from held h
join released r on r.host = h.host and r.port = h.port
order by h.port
