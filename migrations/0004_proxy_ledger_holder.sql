-- LPS schema, part 4: what the proxy ledger needs beyond part 2.
--
-- Forward-only. Adds who a lease is for (mall, start time) so ports can be listed and a
-- vanished node's leases understood, tightens the holder constraint, and trades the LRU
-- index of part 2 for in-place (HOT) updates of this small, very hot table.

-- The mall the current lease was granted for, and when it was granted.
alter table proxy_port add column holder_mall text;
alter table proxy_port add column leased_at timestamptz;

-- Every lease field is set together with holder_node and cleared with it: a port without a
-- holder carries no job, mall or lease start that could be mistaken for a live lease.
alter table proxy_port add constraint proxy_port_lease_fields_follow_holder check (
    holder_node is not null
    or (holder_job is null and holder_mall is null and leased_at is null)
);

-- A lease has a start no later than its end.
alter table proxy_port add constraint proxy_port_lease_start_before_end check (
    leased_at is null or leased_until is null or leased_at <= leased_until
);

-- Keep every acquire and release a HOT update. Both write last_used_at (and the holder
-- columns), and PostgreSQL can only update a row in place (HOT: no new index entries, dead
-- versions pruned on the page without waiting for VACUUM) when no indexed column changes and
-- the page has room. With proxy_port_lru (an index on last_used_at) every update added index
-- entries for a new row version: in a 30 s pgbench of acquire+release cycles at 8 clients the
-- 200-port table grew from 32 kB to 1.7 MB with 60,000 dead versions, and the LRU index scan
-- slowed down as it stepped over them (1,160 -> 620 cycles/s; autovacuum was off on that
-- cluster, and with it on the dead versions still pile up between its visits). Without
-- the index, with pages half empty for the new versions, the table stayed at 32 kB (4 pages),
-- ~100 % of updates were HOT and the rate stayed flat. The pick then reads the few pages of
-- enabled ports and takes the least recently used one (a top-1 sort); that costs ~0.4 ms at
-- 200 ports and ~1.4 ms at 2,000 (acquires come once per IP session, i.e. seconds apart per
-- browser). Likewise no index on holder_node: renew and release_node scan the same pages.
drop index proxy_port_lru;
alter table proxy_port set (fillfactor = 50);
