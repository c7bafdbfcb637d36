-- LPS schema, part 16: each run of a job as its history shows it (`lpsctl job`, GetJob's
-- `runs`): when it started, the error it ended with, and for a blocked or unreadable page
-- the evidence the node kept (PageEvidence as JSON: url, title, marker, the first 32 KiB of
-- HTML, a JPEG screenshot of at most 256 KiB in base64). Rows from before have none of it.
-- Evidence is retained with the job (deleted with it).
alter table job_attempt add column started_at timestamptz;
alter table job_attempt add column error text check (char_length(error) <= 2000);
alter table job_attempt add column evidence jsonb check (
    evidence is null or (jsonb_typeof(evidence) = 'object' and pg_column_size(evidence) <= 524288)
);
