-- LPS schema, part 7: one index fewer on the job queue's hottest path.
--
-- job_running_deadline (deadline_at of running jobs) served no query: a lease never
-- outlives its job's hard deadline (claim and renew cap lease_until at deadline_at), so
-- the reaper finds deadline overruns through job_running_lease, and the ops figure of
-- stuck runs counts running jobs either way. Every claim wrote an entry into it, and a
-- generic plan could pick it to find one running job by a full scan of the index.
drop index job_running_deadline;
