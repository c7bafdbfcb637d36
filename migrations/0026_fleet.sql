-- LPS schema, part 26: alerts through the outbox.
--
-- An alert rule's announcement (firing, resolved) to the alert webhook
-- (LPS_ALERT_WEBHOOK_URL) is a `delivery` row like a search's event: stored in the
-- transaction that records the rule's new state (so a transition is announced exactly
-- once, by whichever replica evaluated it), then posted by the delivery worker with its
-- retries, backoff, signature and dead state, and listed by `lpsctl deliveries`. Such a
-- row has no search: `alert_rule` names the rule instead, and its body (the
-- Slack-compatible message) is rendered when it is stored.
alter table delivery alter column search_id drop not null;
alter table delivery add column alert_rule text
    check (alert_rule ~ '^[a-z0-9_]{1,64}$');
-- A row is a search's event (search_id set) or an alert's (alert_rule set), never both; an
-- alert's body is stored with it and it has no product or schedule.
alter table delivery add constraint delivery_alert_shape check (
    (alert_rule is null) = (search_id is not null)
    and (alert_rule is null
         or (body is not null and product_index is null and schedule_id is null)));

-- Retention of node_session (LPS_RETAIN_NODE_SESSIONS): a row is one node id's latest
-- stream, and node ids come and go with pods (the default id is `<host>-<pid>`), so the
-- table grows with every pod ever started. The sweep deletes rows whose stream ended — or
-- was last seen, for a stream of a coordinator that crashed — longer ago than the age, in
-- (ended, row_id) batches; `row_id` is the cursor's tie-breaker (node_id is text).
alter table node_session add column row_id bigint generated always as identity;
create index node_session_ended
    on node_session ((coalesce(disconnected_at, last_seen_at)), row_id);

-- A port's burn count decays (LPS_PROXY_BURN_HALF_LIFE): a block's release halves what
-- the count was once per half-life since the port's last block, then adds this one, so
-- the cooldown (exponential in the count) of an IP burned long ago starts short again.
-- null: never burned since this column came (the count is then taken as it stands).
alter table proxy_port add column last_burn_at timestamptz;

-- A run whose node vanished (killed, its stream gone) ends without a report of what it
-- spent, yet it spent. Each heartbeat's progress of a lease (bytes so far) is kept on the
-- job for that lease (`progress_epoch` = its lease_epoch), and the statements that end a
-- lost node's lease — the reclaim after the grace, the reaper's expired lease — charge the
-- attempt those bytes (at LPS_PROXY_USD_PER_GB) and mark it `estimated`. A report that
-- arrives later still raises the figures to what it says (spend.sql), and one that covers
-- the estimate clears the mark.
alter table job add column progress_bytes bigint check (progress_bytes >= 0);
alter table job add column progress_epoch bigint;
alter table job_attempt add column estimated boolean not null default false;
