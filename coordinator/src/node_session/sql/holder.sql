-- Who holds node $1's row: the replica and node process of its stream.
select coordinator_id, instance from node_session where node_id = $1
