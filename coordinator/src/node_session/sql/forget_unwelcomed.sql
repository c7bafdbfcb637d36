-- Stream $2 of node $1 registered a new row (register.sql) and was never welcomed (its
-- re-attach failed, or the node went away before the Welcome was handed over): the row
-- goes, so a Hello that was not answered leaves no node behind. Only that stream's row: a
-- newer stream that took the id since keeps its own.
delete from node_session where node_id = $1 and session_id = $2
