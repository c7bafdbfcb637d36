-- LPS schema, part 17: alert rules fire only on what lasted. `firing` stays the announced
-- state; `condition` is the rule's raw condition at the last evaluation and
-- `condition_since` when it last changed, so the evaluator (whichever replica) can wait
-- LPS_ALERT_FOR before firing and LPS_ALERT_RESOLVE_AFTER before resolving.
alter table alert_state add column condition boolean not null default false;
alter table alert_state add column condition_since timestamptz not null default now();
update alert_state set condition = firing, condition_since = since;
