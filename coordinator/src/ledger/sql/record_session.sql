-- Record the end of an IP session of node $3 on port $2 of gateway $1 that was not a
-- release (a SessionEnd report): the data the per-IP budget is tuned from. The port itself
-- is not touched. $4 reason, $5 mall, $6 job, $7 requests, $8 ok, $9 blocked,
-- $10 elapsed ms, $11 now.
insert into ip_session (host, port, mall, node_id, job_id, requests, ok, blocked,
                        elapsed_ms, end_reason, ended_at)
values ($1::text, $2::int, $5::text, $3::text, $6::bigint, $7::int, $8::int, $9::int,
        $10::bigint, $4::session_end_reason, coalesce($11::timestamptz, clock_timestamp()))
returning id
