-- A block burned the proxy IP job $1 was using: its ip_burns + 1 (held at the column's
-- range). Runs in the ledger's transaction that released the port, only when that release
-- ended the job's lease of it. Returns the job's new count; no row: no such job.
update job j set ip_burns = least(j.ip_burns + 1, 32767)
where j.job_id = $1::bigint
returning j.ip_burns
