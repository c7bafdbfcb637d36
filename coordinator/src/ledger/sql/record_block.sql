-- Record one detected bot block reported by node $1 (a BlockEvent). $2 mall, $3 query,
-- $4 ip_request_no, $5 host, $6 port (null: unknown), $7 marker, $8 html_len, $9 headless,
-- $10 elapsed ms, $11 job, $12 now.
insert into bot_detection (mall, query, ip_request_no, host, port, marker, html_len,
                           headless, elapsed_ms, node_id, job_id, detected_at)
values ($2::text, $3::text, $4::int, $5::text, $6::int, $7::text, $8::int, $9::bool,
        $10::bigint, $1::text, $11::bigint, coalesce($12::timestamptz, clock_timestamp()))
returning id
