-- Replica $1 starts: the streams an earlier process under its id held died with it (a
-- crash leaves them marked connected).
update node_session set disconnected_at = now()
where coordinator_id = $1 and disconnected_at is null
