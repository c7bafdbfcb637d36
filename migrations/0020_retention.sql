-- LPS schema, part 20: indexes for the retention sweeps (coordinator/src/retention).
--
-- Each sweep deletes in key-range batches: the rows after a cursor (age column, id) in
-- that order, so a batch starts where the previous one ended. The row comparison
-- `(t, id) > (cursor)` is an index condition only on an index over both columns; over the
-- age column alone every batch re-read the rows of equal age before the cursor (and the
-- dead index entries of the rows already deleted), which made a sweep over rows of one
-- timestamp quadratic (retention-bench: a batch of 500 at 123,000 rows took 60 s, not 6).
-- The indexes on the age column alone are replaced by ones over (age, id): they serve the
-- same range reads (ops figures over the last hours, client_ops.sql).

drop index job_finished_at;
create index job_finished_at on job (finished_at, job_id) where finished_at is not null;

drop index search_request_created;
create index search_request_created on search_request (created_at, search_id);

drop index ip_session_ended;
create index ip_session_ended on ip_session (ended_at, id);

drop index bot_detection_at;
create index bot_detection_at on bot_detection (detected_at, id);

-- Price history by observation time (age and thinning sweeps; a product's entries are
-- found by price_history_product).
create index price_history_observed on price_history (observed_at, id);

-- A deleted job's negative-cache row is found by its job (on delete cascade), and the job
-- sweep asks whether a job's "not found" is still cached: without it each deleted job
-- scanned the whole negative cache.
create index negative_cache_job on negative_cache (job_id);
