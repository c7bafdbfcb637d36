-- An operator ends node $1's quarantine now (lpsctl lift-quarantine): no quarantine, its
-- drop count starting over; `quarantines` stays, so a relapse lasts longer. No row: it was
-- not quarantined.
update node_session set
    quarantined_until = null, quarantine_reason = null, drops = 0, drops_since = null
where node_id = $1 and quarantined_until > now()
