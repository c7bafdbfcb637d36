//! Alert rules over the ops snapshot (DESIGN §6, §8).
//!
//! Every `interval` the loop refreshes the metrics from the ops snapshot; the replica that
//! wins a PostgreSQL advisory lock also evaluates the rules, on a snapshot taken after it
//! won the lock (so never on one older than the last committed evaluation). A rule's firing state lives in
//! the `alert_state` table, so whichever replica evaluates next knows what was already
//! announced: a rule logs WARN and posts to the Slack-compatible webhook once when it fires
//! and once when it resolves, never on every evaluation. The post goes through the
//! delivery outbox ([`crate::delivery::enqueue_alert`]): the message is stored in the
//! transaction that records the transition, so it commits with it, and the delivery worker
//! posts it with its retries and backoff, signed, dead after `LPS_DELIVERY_MAX_ATTEMPTS`,
//! listed by `lpsctl deliveries` (no transaction is held across the post).
//!
//! A rule announces only what lasted: its condition must hold for [`AlertConfig::fire_after`]
//! (`LPS_ALERT_FOR`) before it fires, and must be gone for [`AlertConfig::resolve_after`]
//! (`LPS_ALERT_RESOLVE_AFTER`) before it resolves, so a figure hovering at its threshold
//! does not page on every crossing ([`step`]). An event rule (`block_ended_sessions_6h`)
//! fires when its count rises and resolves after the quiet period, not when the events age
//! out of its 6-hour window. Messages name the deployment (`LPS_DEPLOYMENT`), the replica
//! that evaluated, and the command that shows more.
//!
//! `layout_changed` watches every mall's share of `layout` failures over the attempts of
//! the last 15 minutes (the ops snapshot's `layout_share_15m`): it fires while some mall
//! with at least [`Thresholds::layout_min_attempts`] finished attempts is above
//! [`Thresholds::layout_share`], names those malls, and resolves when none is.
//!
//! `spend_cap_reached` fires while a spend cap stops claims — the deployment's
//! (`LPS_SPEND_CAP_HOURLY_USD`) or a mall's (its profile's `spend_cap_hourly_usd`) — names
//! the capped scopes, and resolves when the rolling hour has freed them all. Its value is
//! the largest share of its cap any capped scope has spent (threshold 1.0).
//!
//! `nodes_quarantined` fires while a crawler node is quarantined for dropping its jobs
//! again and again (no new assignments until its back-off ends; `lpsctl nodes` shows it)
//! and resolves when none is (threshold 1).

use std::{sync::Arc, time::Duration};

use serde::Serialize;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::{
    fleet::FleetOps,
    metrics::{MallLabels, MallStateLabels, Metrics, RuleLabels, StateLabels},
    ops::{Ops, OpsSnapshot},
    queue::spend_capped,
};

/// Advisory lock key of the evaluator ("lps-alrt").
const EVALUATOR_LOCK: i64 = 0x6c70_732d_616c_7274;

/// Default of [`Thresholds::layout_share`] (`LPS_ALERT_LAYOUT_SHARE`).
pub const DEFAULT_LAYOUT_SHARE: f64 = 0.5;
/// Default of [`Thresholds::layout_min_attempts`] (`LPS_ALERT_LAYOUT_MIN_ATTEMPTS`).
pub const DEFAULT_LAYOUT_MIN_ATTEMPTS: u32 = 3;

/// Thresholds; a rule fires when its figure reaches the threshold (`ports_available_pct`:
/// when it falls to or below it; `layout_share`: when a mall's share is above it).
#[derive(Debug, Clone, PartialEq)]
pub struct Thresholds {
    pub dead_last_hour: f64,
    pub blocks_last_hour: f64,
    pub oldest_queued: Duration,
    pub stuck_running: f64,
    pub deadline_kills_last_hour: f64,
    pub cost_usd_last_hour: f64,
    pub ports_available_pct: f64,
    pub block_ended_sessions_6h: f64,
    /// `deliveries_dead`: delivery events dead after their last attempt (an operator
    /// retries them).
    pub deliveries_dead: f64,
    /// `layout_changed` fires when a mall's share of layout failures over the last 15
    /// minutes is above this (0..=1).
    pub layout_share: f64,
    /// ... counting only malls with at least this many finished attempts in the window, so
    /// that one failure does not page anyone.
    pub layout_min_attempts: u32,
}

// The alert rules' flag defaults (the coordinator's `LPS_ALERT_*` thresholds).
pub const DEFAULT_ALERT_DEAD_1H: f64 = 1.0;
pub const DEFAULT_ALERT_BLOCKS_1H: f64 = 80.0;
pub const DEFAULT_ALERT_OLDEST_QUEUED: &str = "600s";
pub const DEFAULT_ALERT_STUCK: f64 = 1.0;
pub const DEFAULT_ALERT_DEADLINE_KILLS_1H: f64 = 5.0;
pub const DEFAULT_ALERT_COST_1H_USD: f64 = 1.0;
pub const DEFAULT_ALERT_PORTS_AVAILABLE_PCT: f64 = 30.0;
pub const DEFAULT_ALERT_BLOCK_SESSIONS_6H: f64 = 1.0;
pub const DEFAULT_ALERT_DELIVERIES_DEAD: f64 = 1.0;

impl Default for Thresholds {
    /// The flag defaults (`DEFAULT_ALERT_*` above).
    fn default() -> Self {
        Self {
            dead_last_hour: DEFAULT_ALERT_DEAD_1H,
            blocks_last_hour: DEFAULT_ALERT_BLOCKS_1H,
            oldest_queued: crate::settings::default_duration(DEFAULT_ALERT_OLDEST_QUEUED),
            stuck_running: DEFAULT_ALERT_STUCK,
            deadline_kills_last_hour: DEFAULT_ALERT_DEADLINE_KILLS_1H,
            cost_usd_last_hour: DEFAULT_ALERT_COST_1H_USD,
            ports_available_pct: DEFAULT_ALERT_PORTS_AVAILABLE_PCT,
            block_ended_sessions_6h: DEFAULT_ALERT_BLOCK_SESSIONS_6H,
            deliveries_dead: DEFAULT_ALERT_DELIVERIES_DEAD,
            layout_share: DEFAULT_LAYOUT_SHARE,
            layout_min_attempts: DEFAULT_LAYOUT_MIN_ATTEMPTS,
        }
    }
}

/// One rule's verdict on a snapshot.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub rule: &'static str,
    pub firing: bool,
    pub value: f64,
    pub threshold: f64,
    /// What the figure is made of, for the announcement (empty for most rules;
    /// `layout_changed`: the malls above the threshold).
    pub detail: String,
    /// An event count: the condition is "it rose since the last evaluation", not "it is at
    /// or above the threshold".
    pub event: bool,
}

/// A rule's stored state (`alert_state`): what was announced, and the raw condition with
/// when it last changed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RuleState {
    pub firing: bool,
    pub condition: bool,
    pub condition_since: chrono::DateTime<chrono::Utc>,
    pub value: f64,
}

/// The next state of a rule given its verdict at `now` (pure): the condition is the
/// verdict's (for an event rule: its count rose above the stored value), and the announced
/// state follows it only once it has held for `fire_after` (firing) or `resolve_after`
/// (resolving). `previous` is `None` for a rule never evaluated.
pub fn step(
    previous: Option<RuleState>,
    verdict: &Verdict,
    now: chrono::DateTime<chrono::Utc>,
    fire_after: Duration,
    resolve_after: Duration,
) -> RuleState {
    let condition = if verdict.event {
        previous.is_some_and(|p| verdict.value > p.value) && verdict.firing
    } else {
        verdict.firing
    };
    let (was_firing, since) = match previous {
        Some(p) if p.condition == condition => (p.firing, p.condition_since),
        Some(p) => (p.firing, now),
        None => (false, now),
    };
    let held = (now - since).to_std().unwrap_or_default();
    // NB: an event has no duration: it fires at once; its quiet period is the hold-down.
    let firing = match (was_firing, condition) {
        (false, true) => verdict.event || held >= fire_after,
        (true, false) => held < resolve_after,
        (state, _) => state,
    };
    RuleState {
        firing,
        condition,
        condition_since: since,
        value: verdict.value,
    }
}

/// The command an operator runs to see more of what `rule` is about.
fn hint(rule: &str) -> &'static str {
    match rule {
        "dead_last_hour" | "deadline_kills_last_hour" | "stuck_running" => {
            "`lpsctl ops`, then `lpsctl job <id>` (RetryDead: `lpsctl retry-dead`)"
        }
        "blocks_last_hour" | "block_ended_sessions_6h" | "proxy_ports_available_pct" => {
            "`lpsctl ports` and `lpsctl ports advise <mall>`"
        }
        "layout_changed" => "`lpsctl ops` (layout per mall), then `lpsctl job <id> --evidence DIR`",
        "deliveries_dead" => "`lpsctl deliveries --dead`, then `lpsctl delivery retry <id>`",
        "nodes_quarantined" => "`lpsctl nodes` (quarantined until, and why), then the node's logs",
        _ => "`lpsctl ops`",
    }
}

/// Evaluates every rule (pure; the loop does the I/O).
pub fn evaluate(t: &Thresholds, ops: &OpsSnapshot) -> Vec<Verdict> {
    let q = &ops.queue;
    let f = &ops.fleet;
    let at_least = |rule, value: f64, threshold: f64| Verdict {
        rule,
        firing: value >= threshold,
        value,
        threshold,
        detail: String::new(),
        event: false,
    };
    let mut v = vec![
        at_least("dead_last_hour", q.dead_last_hour as f64, t.dead_last_hour),
        at_least(
            "blocks_last_hour",
            f.blocks_last_hour as f64,
            t.blocks_last_hour,
        ),
        at_least(
            "oldest_queued_seconds",
            q.oldest_queued.map_or(0.0, |d| d.as_secs_f64()),
            t.oldest_queued.as_secs_f64(),
        ),
        at_least("stuck_running", q.stuck_running as f64, t.stuck_running),
        at_least(
            "deliveries_dead",
            ops.deliveries.dead as f64,
            t.deliveries_dead,
        ),
        at_least(
            "deadline_kills_last_hour",
            q.deadline_kills_last_hour as f64,
            t.deadline_kills_last_hour,
        ),
        at_least(
            "cost_usd_last_hour",
            q.cost_usd_last_hour,
            t.cost_usd_last_hour,
        ),
        Verdict {
            event: true,
            ..at_least(
                "block_ended_sessions_6h",
                f.block_ended_sessions_6h as f64,
                t.block_ended_sessions_6h,
            )
        },
    ];
    v.push(ports_available(t, f));
    v.push(layout_changed(t, ops));
    v.push(spend_cap_reached(ops));
    v.push(at_least(
        "nodes_quarantined",
        f.nodes_quarantined as f64,
        1.0,
    ));
    v
}

/// `proxy_ports_available_pct`: its value is the lowest share of ports available for one
/// enabled mall (per-mall cooldowns after blocks count: a mall whose every exit IP cools
/// gets no port although the ports serve other malls); it fires at or below the threshold
/// and names the malls there.
fn ports_available(t: &Thresholds, f: &FleetOps) -> Verdict {
    let pct = f.ports_available_min_pct();
    let low: Vec<String> = f
        .malls
        .iter()
        .filter(|m| m.enabled && f.pct(m.ports_available) <= t.ports_available_pct)
        .map(|m| {
            format!(
                "{}: {} of {} ports available ({} cooling)",
                m.mall, m.ports_available, f.ports_total, m.ports_cooling
            )
        })
        .collect();
    Verdict {
        rule: "proxy_ports_available_pct",
        firing: f.ports_total > 0 && pct <= t.ports_available_pct,
        value: pct,
        threshold: t.ports_available_pct,
        detail: low.join(", "),
        event: false,
    }
}

/// `spend_cap_reached`: fires while a scope's spend over the rolling hour has reached its
/// cap (the claim statements then claim nothing for it); its value is the largest share of
/// its cap a capped scope has spent.
fn spend_cap_reached(ops: &OpsSnapshot) -> Verdict {
    let q = &ops.queue;
    let deployment = q
        .spend_cap_hourly_usd
        .map(|cap| ("deployment", q.cost_usd_last_hour, cap));
    let malls = q.malls.iter().filter_map(|m| {
        m.spend_cap_hourly_usd
            .map(|cap| (m.mall.as_str(), m.spend_usd_last_hour, cap))
    });
    let scopes: Vec<(&str, f64, f64)> = deployment.into_iter().chain(malls).collect();
    let capped: Vec<String> = scopes
        .iter()
        .filter(|(_, spend, cap)| spend_capped(*spend, Some(*cap)))
        .map(|(scope, spend, cap)| {
            format!("{scope}: {spend:.2} of {cap:.2} USD in 1h, claims stopped")
        })
        .collect();
    Verdict {
        rule: "spend_cap_reached",
        firing: !capped.is_empty(),
        value: scopes
            .iter()
            .map(|(_, spend, cap)| spend / cap)
            .fold(0.0, f64::max),
        threshold: 1.0,
        detail: capped.join(", "),
        event: false,
    }
}

/// `layout_changed`: its value is the highest layout share over the malls with enough
/// finished attempts; it fires while one of them is above the threshold.
fn layout_changed(t: &Thresholds, ops: &OpsSnapshot) -> Verdict {
    let counted: Vec<_> = ops
        .queue
        .malls
        .iter()
        .filter(|m| m.finished_15m >= i64::from(t.layout_min_attempts))
        .collect();
    let above: Vec<String> = counted
        .iter()
        .filter(|m| m.layout_share_15m() > t.layout_share)
        .map(|m| {
            format!(
                "{}: {} of {} attempts in 15m failed as layout",
                m.mall, m.layout_failures_15m, m.finished_15m
            )
        })
        .collect();
    Verdict {
        rule: "layout_changed",
        firing: !above.is_empty(),
        value: counted
            .iter()
            .map(|m| m.layout_share_15m())
            .fold(0.0, f64::max),
        threshold: t.layout_share,
        detail: above.join(", "),
        event: false,
    }
}

#[derive(Debug, Serialize)]
struct SlackMessage {
    text: String,
}

/// The alert loop's settings.
#[derive(Clone)]
pub struct AlertConfig {
    pub thresholds: Thresholds,
    pub interval: Duration,
    /// How long a rule's condition must hold before it fires (`LPS_ALERT_FOR`).
    pub fire_after: Duration,
    /// How long it must be gone before the rule resolves (`LPS_ALERT_RESOLVE_AFTER`).
    pub resolve_after: Duration,
    /// Names the deployment in messages (`LPS_DEPLOYMENT`).
    pub deployment: String,
    /// Names this replica in messages (its coordinator id).
    pub replica: String,
    /// Whether transitions are posted to the alert webhook (`LPS_ALERT_WEBHOOK_URL`; the
    /// delivery worker holds its URL, a secret).
    pub webhook: bool,
}

impl std::fmt::Debug for AlertConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlertConfig")
            .field("thresholds", &self.thresholds)
            .field("interval", &self.interval)
            .field("fire_after", &self.fire_after)
            .field("resolve_after", &self.resolve_after)
            .field("deployment", &self.deployment)
            .field("webhook", &self.webhook)
            .finish()
    }
}

/// Refreshes metrics and evaluates alerts every `interval` until cancelled.
pub async fn run(
    pool: PgPool,
    ops: Ops,
    metrics: Arc<Metrics>,
    config: AlertConfig,
    cancel: CancellationToken,
) {
    let mut tick = tokio::time::interval(config.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            _ = tick.tick() => {}
        }
        evaluate_once(&pool, &ops, &metrics, &config).await;
    }
}

/// One round of the loop: tries the evaluator lock, then takes a fresh ops snapshot,
/// refreshes the metrics from it and, when this replica holds the lock, evaluates the rules
/// and announces each rule whose state changed. Errors are logged here (the next round
/// tries again).
///
/// The snapshot is taken *after* the lock is won: a replica whose snapshot predates another
/// replica's committed evaluation would otherwise announce a stale state (a rule firing
/// again right after it resolved).
async fn evaluate_once(pool: &PgPool, ops: &Ops, metrics: &Metrics, config: &AlertConfig) {
    let evaluator = match Evaluator::try_lock(pool).await {
        Ok(e) => e,
        Err(e) => {
            warn!(error = %e, "alert evaluator lock failed");
            None
        }
    };
    let ops = match ops.snapshot().await {
        Ok(ops) => ops,
        Err(e) => {
            warn!(error = %e, "ops snapshot failed");
            return;
        }
    };
    publish(metrics, &ops);
    if let Some(evaluator) = evaluator {
        match evaluator
            .transitions(&evaluate(&config.thresholds, &ops), config)
            .await
        {
            Ok(changes) => {
                for verdict in &changes {
                    log_transition(verdict);
                }
            }
            Err(e) => warn!(error = %e, "alert evaluation failed"),
        }
    }
    // Mirror the shared state into this replica's gauge.
    if let Ok(rows) = sqlx::query!("select rule, firing from alert_state")
        .fetch_all(pool)
        .await
    {
        for r in rows {
            metrics
                .alert_firing
                .get_or_create(&RuleLabels { rule: r.rule })
                .set(i64::from(r.firing));
        }
    }
}

/// A transaction holding the evaluator lock (released when it commits or drops).
struct Evaluator(sqlx::Transaction<'static, sqlx::Postgres>);

impl Evaluator {
    /// `None` when another replica holds the lock.
    async fn try_lock(pool: &PgPool) -> Result<Option<Self>, sqlx::Error> {
        let mut tx = pool.begin().await?;
        let locked: bool = sqlx::query_scalar!(
            r#"select pg_try_advisory_xact_lock($1) as "locked!""#,
            EVALUATOR_LOCK
        )
        .fetch_one(&mut *tx)
        .await?;
        Ok(locked.then_some(Self(tx)))
    }

    /// Steps each rule's stored state ([`step`]) and returns the rules whose announced
    /// state changed, with it.
    async fn transitions(
        mut self,
        verdicts: &[Verdict],
        config: &AlertConfig,
    ) -> Result<Vec<Verdict>, crate::error::Error> {
        let tx = &mut self.0;
        let now: chrono::DateTime<chrono::Utc> = sqlx::query_scalar!(r#"select now() as "now!""#)
            .fetch_one(&mut **tx)
            .await?;
        let mut changed = Vec::new();
        for v in verdicts {
            let previous = sqlx::query_as!(
                RuleState,
                "select firing, condition, condition_since, value from alert_state where rule = $1",
                v.rule
            )
            .fetch_optional(&mut **tx)
            .await?;
            let next = step(previous, v, now, config.fire_after, config.resolve_after);
            sqlx::query!(
                "insert into alert_state (rule, firing, value, threshold, since, condition,
                                          condition_since)
                 values ($1, $2, $3, $4, $5, $6, $7)
                 on conflict (rule) do update set
                     firing = excluded.firing, value = excluded.value,
                     threshold = excluded.threshold,
                     since = case when alert_state.firing = excluded.firing
                                  then alert_state.since else excluded.since end,
                     condition = excluded.condition, condition_since = excluded.condition_since",
                v.rule,
                next.firing,
                v.value,
                v.threshold,
                now,
                next.condition,
                next.condition_since
            )
            .execute(&mut **tx)
            .await?;
            if previous.is_some_and(|p| p.firing) != next.firing {
                let changed_to = Verdict {
                    firing: next.firing,
                    ..v.clone()
                };
                if config.webhook {
                    let body = serde_json::to_string(&SlackMessage {
                        text: message(config, &changed_to),
                    })
                    .expect("a message serializes");
                    crate::delivery::enqueue_alert(tx, v.rule, &body, None).await?;
                }
                changed.push(changed_to);
            }
        }
        self.0.commit().await?;
        Ok(changed)
    }
}

/// Logs a committed transition (WARN when it fires).
fn log_transition(v: &Verdict) {
    if v.firing {
        warn!(
            rule = v.rule,
            value = v.value,
            threshold = v.threshold,
            detail = %v.detail,
            "alert firing"
        );
    } else {
        info!(rule = v.rule, value = v.value, "alert resolved");
    }
}

/// The webhook's text for a transition of `v`: the rule, its value and threshold, what it
/// names, the deployment and replica, and the command that shows more.
fn message(config: &AlertConfig, v: &Verdict) -> String {
    if v.firing {
        let mut text = format!(
            ":rotating_light: LPS alert {} firing: {:.2} (threshold {:.2})",
            v.rule, v.value, v.threshold
        );
        if !v.detail.is_empty() {
            text.push_str(": ");
            text.push_str(&v.detail);
        }
        text.push_str(&format!(
            " — deployment {}, replica {}; see {}",
            config.deployment,
            config.replica,
            hint(v.rule)
        ));
        text
    } else {
        format!(
            ":white_check_mark: LPS alert {} resolved: {:.2} — deployment {}, replica {}",
            v.rule, v.value, config.deployment, config.replica
        )
    }
}

/// Sets the deployment-wide gauges of `metrics` from an ops snapshot (each alert round).
pub fn publish(metrics: &Metrics, ops: &OpsSnapshot) {
    metrics.outbox_pending.set(ops.deliveries.pending);
    metrics.outbox_dead.set(ops.deliveries.dead);
    let s = &ops.schedules;
    for (state, n) in [
        ("active", s.active),
        ("paused", s.paused),
        ("waiting", s.waiting),
        ("failing", s.failing),
    ] {
        metrics
            .schedules
            .get_or_create(&StateLabels {
                state: state.into(),
            })
            .set(n);
    }
    let q = &ops.queue;
    for (state, n) in [
        ("queued", q.queued),
        ("running", q.running),
        ("done", q.done),
        ("dead", q.dead),
        ("cancelled", q.cancelled),
    ] {
        metrics
            .jobs
            .get_or_create(&StateLabels {
                state: state.into(),
            })
            .set(n);
    }
    for m in &q.malls {
        for (state, n) in [("queued", m.queued), ("running", m.running)] {
            let labels = MallStateLabels {
                mall: m.mall.clone(),
                state: state.into(),
            };
            metrics.mall_jobs.get_or_create(&labels).set(n);
        }
        let labels = MallLabels {
            mall: m.mall.clone(),
        };
        metrics
            .mall_layout_share_15m
            .get_or_create(&labels)
            .set(m.layout_share_15m());
        metrics
            .mall_spend_usd_last_hour
            .get_or_create(&labels)
            .set(m.spend_usd_last_hour);
        metrics
            .mall_spend_cap_hourly_usd
            .get_or_create(&labels)
            .set(m.spend_cap_hourly_usd.unwrap_or(0.0));
        metrics
            .mall_spend_capped
            .get_or_create(&labels)
            .set(i64::from(m.spend_capped));
    }
    metrics
        .oldest_queued_age
        .set(q.oldest_queued.map_or(0.0, |d| d.as_secs_f64()));
    metrics.dead_last_hour.set(q.dead_last_hour);
    metrics.stuck_running.set(q.stuck_running);
    metrics
        .deadline_kills_last_hour
        .set(q.deadline_kills_last_hour);
    metrics.cost_usd_last_hour.set(q.cost_usd_last_hour);
    metrics
        .spend_cap_hourly_usd
        .set(q.spend_cap_hourly_usd.unwrap_or(0.0));
    metrics.spend_capped.set(i64::from(q.spend_capped));
    let f = &ops.fleet;
    metrics.nodes_connected.set(f.nodes_connected);
    metrics.nodes_quarantined.set(f.nodes_quarantined);
    metrics.node_free_slots.set(f.free_slots);
    metrics.proxy_ports_available.set(f.ports_available);
    metrics
        .proxy_ports_available_min
        .set(f.ports_available_min());
    for m in &f.malls {
        let labels = MallLabels {
            mall: m.mall.clone(),
        };
        metrics
            .mall_proxy_ports_available
            .get_or_create(&labels)
            .set(m.ports_available);
        metrics
            .mall_proxy_ports_cooling
            .get_or_create(&labels)
            .set(m.ports_cooling);
        // The alert's figure, for enabled malls only (a disabled mall needs no ports):
        // the share of all ports, as the rule compares it.
        if m.enabled && f.ports_total > 0 {
            metrics
                .mall_proxy_ports_available_ratio
                .get_or_create(&labels)
                .set(f.pct(m.ports_available) / 100.0);
        } else {
            metrics.mall_proxy_ports_available_ratio.remove(&labels);
        }
    }
    metrics
        .proxy_ports
        .get_or_create(&StateLabels {
            state: "available".into(),
        })
        .set(f.ports_available);
    metrics
        .proxy_ports
        .get_or_create(&StateLabels {
            state: "unavailable".into(),
        })
        .set(f.ports_total - f.ports_available);
    metrics.blocks_last_hour.set(f.blocks_last_hour);
    metrics
        .block_ended_sessions_6h
        .set(f.block_ended_sessions_6h);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(value: f64, threshold: f64, event: bool) -> Verdict {
        Verdict {
            rule: "r",
            firing: value >= threshold,
            value,
            threshold,
            detail: String::new(),
            event,
        }
    }

    #[test]
    fn a_rule_fires_on_what_lasted_and_resolves_after_a_hold_down() {
        let t0 = chrono::Utc::now();
        let at = |s: i64| t0 + chrono::Duration::seconds(s);
        let (fire, resolve) = (Duration::from_secs(30), Duration::from_secs(120));
        let mut state = None;
        let mut announced = Vec::new();
        // Above the threshold at 0 s, below at 5 s, above again at 20 s and from then on.
        for (s, value) in [
            (0, 5.0),
            (5, 0.0),
            (20, 5.0),
            (35, 5.0),
            (50, 5.0),
            (65, 5.0),
        ] {
            let next = step(state, &verdict(value, 1.0, false), at(s), fire, resolve);
            if next.firing != state.is_some_and(|p: RuleState| p.firing) {
                announced.push((s, next.firing));
            }
            state = Some(next);
        }
        assert_eq!(
            announced,
            [(50, true)],
            "fires once the condition held 30 s"
        );
        // Gone for 5 s and back: no resolve, no second firing.
        for (s, value) in [(70, 0.0), (75, 5.0), (80, 0.0), (150, 0.0), (210, 0.0)] {
            let next = step(state, &verdict(value, 1.0, false), at(s), fire, resolve);
            if next.firing != state.is_some_and(|p| p.firing) {
                announced.push((s, next.firing));
            }
            state = Some(next);
        }
        assert_eq!(
            announced,
            [(50, true), (210, false)],
            "resolved 120 s after it was gone"
        );
    }

    #[test]
    fn an_event_rule_fires_on_a_rise_and_resolves_after_quiet() {
        let t0 = chrono::Utc::now();
        let at = |s: i64| t0 + chrono::Duration::seconds(s);
        let (fire, resolve) = (Duration::from_secs(30), Duration::from_secs(120));
        let first = step(None, &verdict(0.0, 1.0, true), at(0), fire, resolve);
        assert!(!first.firing);
        let rose = step(Some(first), &verdict(1.0, 1.0, true), at(15), fire, resolve);
        assert!(rose.firing, "an event fires at once");
        // The 6-hour count stays at 1: quiet from here on.
        let still = step(Some(rose), &verdict(1.0, 1.0, true), at(60), fire, resolve);
        assert!(still.firing && !still.condition);
        let quiet = step(
            Some(still),
            &verdict(1.0, 1.0, true),
            at(200),
            fire,
            resolve,
        );
        assert!(
            !quiet.firing,
            "resolved after the quiet period, not after 6 h"
        );
        let again = step(
            Some(quiet),
            &verdict(2.0, 1.0, true),
            at(230),
            fire,
            resolve,
        );
        assert!(again.firing, "a new event fires again");
    }
    use crate::{
        fleet::MallFleetOps,
        queue::{MallQueueOps, QueueOps},
    };

    fn snapshot(dead: i64, ports_total: i64, ports_available: i64) -> OpsSnapshot {
        OpsSnapshot {
            at: chrono::Utc::now(),
            queue: QueueOps {
                queued: 0,
                running: 0,
                done: 0,
                dead,
                cancelled: 0,
                oldest_queued: None,
                dead_last_hour: dead,
                stuck_running: 0,
                deadline_kills_last_hour: 0,
                cost_usd_last_hour: 0.0,
                spend_cap_hourly_usd: None,
                spend_capped: false,
                malls: vec![],
            },
            fleet: FleetOps {
                nodes_connected: 0,
                nodes_quarantined: 0,
                free_slots: 0,
                ports_total,
                ports_available,
                blocks_last_hour: 0,
                block_ended_sessions_6h: 0,
                malls: vec![],
            },
            alerts: vec![],
            clients: Vec::new(),
            profile_sets: Vec::new(),
            deliveries: Default::default(),
            schedules: Default::default(),
        }
    }

    fn mall(name: &str, finished: i64, layout: i64) -> MallQueueOps {
        MallQueueOps {
            mall: name.into(),
            queued: 0,
            running: 0,
            max_running: None,
            min_start_gap: Duration::ZERO,
            finished_15m: finished,
            layout_failures_15m: layout,
            spend_usd_last_hour: 0.0,
            spend_cap_hourly_usd: None,
            spend_capped: false,
        }
    }

    #[test]
    fn spend_cap_reached_fires_while_a_scope_is_capped_and_names_it() {
        let mut ops = snapshot(0, 0, 0);
        let v = spend_cap_reached(&ops);
        assert!(!v.firing && v.value == 0.0, "no caps: {v:?}");
        // Deployment at 3 of 4 USD; beta's own cap of 1 USD reached.
        ops.queue.cost_usd_last_hour = 3.0;
        ops.queue.spend_cap_hourly_usd = Some(4.0);
        ops.queue.malls = vec![
            MallQueueOps {
                spend_usd_last_hour: 2.0,
                ..mall("alpha", 0, 0)
            },
            MallQueueOps {
                spend_usd_last_hour: 1.0,
                spend_cap_hourly_usd: Some(1.0),
                ..mall("beta", 0, 0)
            },
        ];
        let v = spend_cap_reached(&ops);
        assert!(v.firing, "{v:?}");
        assert_eq!((v.value, v.threshold), (1.0, 1.0));
        assert_eq!(v.detail, "beta: 1.00 of 1.00 USD in 1h, claims stopped");
        // Below every cap: resolved, the value is the largest share spent.
        ops.queue.malls[1].spend_usd_last_hour = 0.5;
        let v = spend_cap_reached(&ops);
        assert!(!v.firing, "{v:?}");
        assert_eq!(v.value, 0.75);
        ops.queue.cost_usd_last_hour = 4.0;
        let v = spend_cap_reached(&ops);
        assert_eq!(
            v.detail,
            "deployment: 4.00 of 4.00 USD in 1h, claims stopped"
        );
    }

    #[test]
    fn layout_changed_needs_enough_attempts_and_names_the_malls() {
        let t = Thresholds::default();
        let mut ops = snapshot(0, 0, 0);
        // alpha: every attempt failed, but too few to count; gamma: exactly half is not
        // above the threshold; beta fires.
        ops.queue.malls = vec![
            mall("alpha", 2, 2),
            mall("beta", 4, 3),
            mall("gamma", 10, 5),
        ];
        let v = layout_changed(&t, &ops);
        assert!(v.firing, "{v:?}");
        assert_eq!(v.value, 0.75);
        assert_eq!(v.threshold, DEFAULT_LAYOUT_SHARE);
        assert_eq!(v.detail, "beta: 3 of 4 attempts in 15m failed as layout");
        ops.queue.malls = vec![mall("alpha", 2, 2), mall("gamma", 10, 5)];
        let v = layout_changed(&t, &ops);
        assert!(!v.firing, "{v:?}");
        assert_eq!(v.value, 0.5);
        assert!(v.detail.is_empty());
        let strict = Thresholds {
            layout_min_attempts: 1,
            ..Thresholds::default()
        };
        assert!(layout_changed(&strict, &ops).firing);
    }

    #[test]
    fn rules_fire_at_their_thresholds() {
        let t = Thresholds::default();
        let quiet = evaluate(&t, &snapshot(0, 0, 0));
        assert!(quiet.iter().all(|v| !v.firing), "{quiet:?}");
        let loud = evaluate(&t, &snapshot(1, 10, 3));
        let firing: Vec<_> = loud.iter().filter(|v| v.firing).map(|v| v.rule).collect();
        assert_eq!(firing, ["dead_last_hour", "proxy_ports_available_pct"]);
    }

    fn fleet_mall(name: &str, enabled: bool, available: i64, cooling: i64) -> MallFleetOps {
        MallFleetOps {
            mall: name.into(),
            enabled,
            blocks_last_hour: 0,
            ports_cooling: cooling,
            ports_available: available,
        }
    }

    #[test]
    fn ports_rule_sees_a_mall_whose_every_port_cools() {
        let t = Thresholds::default();
        // 8 of 8 free deployment-wide, but every port cools for alpha after blocks.
        let mut ops = snapshot(0, 8, 8);
        ops.fleet.malls = vec![
            fleet_mall("alpha", true, 0, 8),
            fleet_mall("beta", true, 8, 0),
            fleet_mall("off", false, 0, 8),
        ];
        assert_eq!(ops.fleet.ports_available_pct(), 100.0);
        assert_eq!(
            ops.fleet.lowest_mall().map(|m| m.mall.as_str()),
            Some("alpha")
        );
        let v = ports_available(&t, &ops.fleet);
        assert!(v.firing, "{v:?}");
        assert_eq!(v.value, 0.0);
        assert_eq!(v.detail, "alpha: 0 of 8 ports available (8 cooling)");
        // A disabled mall's cooldowns do not page anyone.
        ops.fleet.malls[0].ports_available = 8;
        let v = ports_available(&t, &ops.fleet);
        assert!(!v.firing && v.value == 100.0, "{v:?}");
        // Without enabled malls the deployment-wide figure counts.
        ops.fleet.malls.clear();
        ops.fleet.ports_available = 2;
        assert!(ports_available(&t, &ops.fleet).firing);
    }

    #[test]
    fn the_per_mall_share_is_published_for_enabled_malls_only() {
        let metrics = Metrics::new();
        let mut ops = snapshot(0, 8, 8);
        ops.fleet.malls = vec![
            fleet_mall("alpha", true, 0, 8),
            fleet_mall("beta", true, 2, 0),
            fleet_mall("off", false, 0, 8),
        ];
        publish(&metrics, &ops);
        let text = metrics.encode();
        assert!(
            text.contains("lps_mall_proxy_ports_available_ratio{mall=\"alpha\"} 0.0"),
            "{text}"
        );
        assert!(
            text.contains("lps_mall_proxy_ports_available_ratio{mall=\"beta\"} 0.25"),
            "{text}"
        );
        assert!(
            !text.contains("lps_mall_proxy_ports_available_ratio{mall=\"off\"}"),
            "{text}"
        );
        // A mall disabled since, or a ledger without ports: the series goes.
        ops.fleet.malls[1].enabled = false;
        publish(&metrics, &ops);
        let text = metrics.encode();
        assert!(
            !text.contains("lps_mall_proxy_ports_available_ratio{mall=\"beta\"}"),
            "{text}"
        );
        ops.fleet.ports_total = 0;
        publish(&metrics, &ops);
        assert!(
            !metrics
                .encode()
                .contains("lps_mall_proxy_ports_available_ratio{")
        );
    }
}
