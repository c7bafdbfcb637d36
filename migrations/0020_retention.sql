-- LPS schema, part 20: indexes for the retention sweeps (coordinator/src/retention).
--
-- Each sweep deletes in key-range batches ordered by a row's age column and id; these
-- indexes give the two tables that had no such order one, so a batch reads only the rows
-- it deletes (plus those it must keep) instead of scanning the table.

-- Price history by observation time (age and thinning sweeps; a product's entries are
-- found by price_history_product).
create index price_history_observed on price_history (observed_at, id);

-- A deleted job's negative-cache row is found by its job (on delete cascade), and the job
-- sweep asks whether a job's "not found" is still cached: without it each deleted job
-- scanned the whole negative cache.
create index negative_cache_job on negative_cache (job_id);
