-- Stream $2 of node $1 is alive with $3 free slots. Returns whether an operator asked the
-- node to drain and its quarantine (an operator may lift it); no row: the row names another stream now.
update node_session set last_seen_at = now(), free_slots = $3
where node_id = $1 and session_id = $2
returning draining, quarantined_until
