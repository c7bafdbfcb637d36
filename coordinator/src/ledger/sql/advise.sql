-- The IP sessions of mall $1 that ended in the last $2 ms, as a histogram by request count:
-- how many sessions made exactly `requests` requests, and how many of those ended in a
-- block (the blocked request being the session's last). Sessions without a request tell
-- nothing and are left out. Ledger::advise turns this into per-request block rates. $3 now.
with clock as materialized (select coalesce($3::timestamptz, clock_timestamp()) as now)
select s.requests,
       count(*) as "sessions!",
       count(*) filter (where s.end_reason = 'block') as "blocked!"
from ip_session s, clock
where s.mall = $1::text
  and s.ended_at > clock.now - $2::bigint * interval '1 millisecond'
  and s.ended_at <= clock.now
  and s.requests > 0
group by s.requests
order by s.requests
