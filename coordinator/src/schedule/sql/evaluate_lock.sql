-- The evaluation's first statement: locks schedule $1 if its run $2 is the current one and
-- not yet evaluated (else no row: another replica evaluated it, or it was deleted), and
-- reads what the rules need.
select s.products, s.destinations, s.rules, s.last_search_id
from schedule s
where s.schedule_id = $1::bigint and s.run_number = $2::int and s.evaluated_run < $2::int
for update
