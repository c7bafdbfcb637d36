-- Release port $2 of gateway $1 by node $3 with reason $4, and record the IP session, in
-- ONE statement. Guarded by the holder: only node $3's lease with id $17 (the port's
-- use_count when it was granted) is ended, so a late or resent release never ends a newer
-- lease of the same port. Without $17 (a node older than lease ids) the lease is matched
-- by job $6 (null: a warm-up). A node that no longer holds the lease changes nothing on
-- the port, but its session is still recorded. $6 is the job that used the IP last: the
-- session's job, and the job a block burns. By reason:
--   budget      -> the port rests until now + $11 ms;
--   block       -> burn_count decayed by half per $18 ms (the half-life) since the port's
--                  last block, rounded, + 1, and a cooldown for mall $5 of
--                  min($13 cap, $12 base * 2^burns_before) * $14 (the jitter fraction in
--                  [0, 1], drawn by the caller: full jitter), never shortening a longer
--                  one; the caller then counts the burn on job $6 in the same
--                  transaction (the queue's burn_ip.sql) when the lease was held;
--   proxy_error -> a cooldown for every mall until now + $15 ms;
--   otherwise   -> a plain release.
-- Returns whether the lease was held and the job's ip_burns before any burn is counted.
-- $5 mall, $7 requests, $8 ok, $9 blocked, $10 elapsed ms, $16 now.
with
clock as materialized (select coalesce($16::timestamptz, clock_timestamp()) as now),
released as (
    update proxy_port p set
        holder_node = null,
        holder_job = null,
        holder_mall = null,
        leased_at = null,
        leased_until = null,
        last_used_at = clock.now,
        last_reason = $4::session_end_reason,
        rest_until = case when $4::session_end_reason = 'budget'
                          then greatest(p.rest_until, clock.now + $11::bigint * interval '1 millisecond')
                          else p.rest_until end,
        cooldown_until = case when $4::session_end_reason = 'proxy_error'
                              then greatest(p.cooldown_until, clock.now + $15::bigint * interval '1 millisecond')
                              else p.cooldown_until end,
        burn_count = case when $4::session_end_reason = 'block'
                          then round(p.burn_count * power(0.5,
                                   greatest(extract(epoch from clock.now - coalesce(p.last_burn_at, clock.now)), 0)
                                   * 1000 / $18::float8))::int + 1
                          else p.burn_count end,
        last_burn_at = case when $4::session_end_reason = 'block' then clock.now
                            else p.last_burn_at end
    from clock
    where p.host = $1::text
      and p.port = $2::int
      and p.holder_node = $3::text
      and case when $17::bigint is null then p.holder_job is not distinct from $6::bigint
               else p.use_count = $17::bigint end
    returning p.host, p.port, p.burn_count, p.rest_until, p.cooldown_until
),
cooled as (
    insert into proxy_port_cooldown as c (host, port, mall, cooldown_until)
    select r.host, r.port, $5::text,
           clock.now + least($13::float8, $12::float8 * power(2, least(r.burn_count - 1, 60)))
                       * $14::float8 * interval '1 millisecond'
    from released r, clock
    where $4::session_end_reason = 'block'
    on conflict (host, port, mall) do update
        set cooldown_until = greatest(c.cooldown_until, excluded.cooldown_until)
    returning c.cooldown_until
),
session as (
    insert into ip_session (host, port, mall, node_id, job_id, requests, ok, blocked,
                            elapsed_ms, end_reason, ended_at)
    select $1::text, $2::int, $5::text, $3::text, $6::bigint, $7::int, $8::int, $9::int,
           $10::bigint, $4::session_end_reason, clock.now
    from clock
)
select exists (select 1 from released) as "held!",
       (select j.ip_burns from job j where j.job_id = $6::bigint) as "ip_burns?",
       (select r.rest_until from released r) as "rest_until?",
       (select r.cooldown_until from released r) as "cooldown_until?",
       (select c.cooldown_until from cooled c) as "mall_cooldown_until?"
