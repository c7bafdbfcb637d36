-- LPS schema, part 11: what every attempt cost, and an hourly spend cap that stops claims.
--
-- Every report that ends a run carries what it spent (bytes and USD), and every attempt row
-- (job_attempt, one per lease that ended) stores it: finished, failed, handed back,
-- cancelled, reaped and reclaimed runs alike, and also a report that arrives after its lease
-- was lost (the money was spent; the job is not changed). The transitions that end a lease
-- insert the attempt with no spend; queue/sql/spend.sql — the one statement that records
-- spend — then sets the reported figures on it (never lowering them, so a resent report adds
-- nothing) and adds what it added to spend_minute below, in the same statement.

-- A deployment-wide cap on what this mall's attempts may cost per rolling hour, USD
-- (site profile `[limits] spend_cap_hourly_usd`); null = no cap. The claim statements claim
-- no job of a mall whose spend in the last hour has reached it, until the hour frees up.
-- NB: `< 1e9` also keeps out 'NaN' and 'Infinity' (PostgreSQL sorts NaN above every number).
alter table mall add column spend_cap_hourly_usd double precision
    check (spend_cap_hourly_usd is null or (spend_cap_hourly_usd > 0 and spend_cap_hourly_usd < 1e9));

-- The spend of the last hour per mall, in one-minute buckets, so that a claim reads at most
-- 60 rows per mall instead of summing job_attempt over an hour. A ring: a mall has one row per
-- minute of the hour (`slot` = minutes since the epoch mod 60); a bucket whose `minute` is an
-- hour or more old is overwritten by the next spend that falls in its slot, so the table never
-- grows past 60 rows per mall and needs no cleanup. Readers count only buckets with
-- `minute > now - 1 hour` (the rolling hour, 59 to 60 minutes long).
--
-- Spend is bucketed by when it was recorded: a report for a lost lease counts when it
-- arrives. `minute` and `slot` are computed from the epoch, never from the session's time
-- zone, so every session agrees on them.
--
-- NB: a bucket row is locked by the statement that adds to it until its transaction ends;
-- each transaction adds to buckets in one statement, in mall order (spend.sql), so two
-- writers cannot deadlock on them.
create table spend_minute (
    mall     text not null references mall (mall_id) on delete cascade,
    slot     smallint not null check (slot between 0 and 59),
    -- The minute the bucket holds (a whole minute since the epoch).
    minute   timestamptz not null,
    cost_usd double precision not null check (cost_usd >= 0 and cost_usd < 'Infinity'),
    primary key (mall, slot),
    check (slot = (floor(extract(epoch from minute) / 60)::bigint % 60))
);

-- The last hour's spend as it stands, so that a cap applies at once after the upgrade.
insert into spend_minute (mall, slot, minute, cost_usd)
select j.mall, (floor(extract(epoch from m.minute) / 60)::bigint % 60)::smallint, m.minute,
       sum(a.cost_usd)
from job_attempt a
join job j using (job_id)
cross join lateral (
    select to_timestamp(floor(extract(epoch from a.ended_at) / 60) * 60) as minute
) m
where a.cost_usd > 0
  and m.minute > now() - interval '1 hour'
  and m.minute <= now()
group by j.mall, m.minute;
