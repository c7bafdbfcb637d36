-- An operator drains node $1: marked on its row when it is connected or between streams
-- (disconnected less than 5 minutes ago), so every heartbeat answer repeats the Drain and a
-- reconnect of the same process is drained too.
update node_session set draining = true
where node_id = $1 and (disconnected_at is null or disconnected_at > now() - interval '5 minutes')
