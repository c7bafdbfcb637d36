-- The readiness probe's write (readiness.rs): this replica's heartbeat row, upserted; rows
-- of replicas that no longer write (every restart under the default hostname-pid id leaves
-- one) go after a day. $1: the replica id.
with gone as (
    delete from write_probe
    where probed_at < now() - interval '1 day' and replica <> $1
)
insert into write_probe (replica, probed_at)
values ($1, now())
on conflict (replica) do update set probed_at = excluded.probed_at
