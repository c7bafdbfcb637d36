-- Stream $2 of node $1 ended (the row is kept: a drain mark outlives the stream, and the
-- release guards of the queue and the ledger read it).
update node_session set disconnected_at = now() where node_id = $1 and session_id = $2
