//! Alert rules over the ops snapshot (DESIGN §6, §8).
//!
//! Every `interval` the loop refreshes the metrics from the ops snapshot; the replica that
//! wins a PostgreSQL advisory lock also evaluates the rules. A rule's firing state lives in
//! the `alert_state` table, so whichever replica evaluates next knows what was already
//! announced: a rule logs WARN and posts to the Slack-compatible webhook once when it fires
//! and once when it resolves, never on every evaluation. The webhook is called after the
//! state change committed (no transaction is held across it); a failed post is logged.

use std::{sync::Arc, time::Duration};

use serde::Serialize;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::{
    metrics::{Metrics, RuleLabels},
    search::{OpsSnapshot, Searches},
};

/// Advisory lock key of the evaluator ("lps-alrt").
const EVALUATOR_LOCK: i64 = 0x6c70_732d_616c_7274;

/// Thresholds; a rule fires when its figure reaches the threshold (`ports_available_pct`:
/// when it falls to or below it).
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
}

impl Default for Thresholds {
    fn default() -> Self {
        Self {
            dead_last_hour: 1.0,
            blocks_last_hour: 80.0,
            oldest_queued: Duration::from_secs(600),
            stuck_running: 1.0,
            deadline_kills_last_hour: 5.0,
            cost_usd_last_hour: 1.0,
            ports_available_pct: 30.0,
            block_ended_sessions_6h: 1.0,
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
            "deadline_kills_last_hour",
            q.deadline_kills_last_hour as f64,
            t.deadline_kills_last_hour,
        ),
        at_least(
            "cost_usd_last_hour",
            q.cost_usd_last_hour,
            t.cost_usd_last_hour,
        ),
        at_least(
            "block_ended_sessions_6h",
            f.block_ended_sessions_6h as f64,
            t.block_ended_sessions_6h,
        ),
    ];
    let pct = f.ports_available_pct();
    v.push(Verdict {
        rule: "proxy_ports_available_pct",
        firing: f.ports_total > 0 && pct <= t.ports_available_pct,
        value: pct,
        threshold: t.ports_available_pct,
    });
    v
}

#[derive(Debug, Serialize)]
struct SlackMessage {
    text: String,
}

/// The alert loop's settings. `Debug` does not show the webhook URL (a secret).
#[derive(Clone)]
pub struct AlertConfig {
    pub thresholds: Thresholds,
    pub interval: Duration,
    /// Slack-compatible incoming webhook (secret: never logged).
    pub webhook_url: Option<String>,
}

impl std::fmt::Debug for AlertConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlertConfig")
            .field("thresholds", &self.thresholds)
            .field("interval", &self.interval)
            .field("webhook_url", &self.webhook_url.as_ref().map(|_| "***"))
            .finish()
    }
}

/// Refreshes metrics and evaluates alerts every `interval` until cancelled.
pub async fn run(
    pool: PgPool,
    searches: Searches,
    metrics: Arc<Metrics>,
    config: AlertConfig,
    cancel: CancellationToken,
) {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build();
    let client = match client {
        Ok(c) => c,
        Err(e) => {
            warn!(error = %e, "cannot build the webhook client; alerts will only be logged");
            reqwest::Client::new()
        }
    };
    let mut tick = tokio::time::interval(config.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            _ = tick.tick() => {}
        }
        let ops = match searches.ops().await {
            Ok(ops) => ops,
            Err(e) => {
                warn!(error = %e, "ops snapshot failed");
                continue;
            }
        };
        metrics.update(&ops);
        match transitions(&pool, &evaluate(&config.thresholds, &ops)).await {
            Ok(Some(changes)) => {
                for (verdict, firing) in changes {
                    announce(&client, config.webhook_url.as_deref(), &verdict, firing).await;
                }
            }
            Ok(None) => {} // another replica evaluates
            Err(e) => warn!(error = %e, "alert evaluation failed"),
        }
        // Mirror the shared state into this replica's gauge.
        if let Ok(rows) = sqlx::query!("select rule, firing from alert_state")
            .fetch_all(&pool)
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
}

/// Under the evaluator lock: stores each rule's state and returns the rules whose state
/// changed (`None` when another replica holds the lock).
async fn transitions(
    pool: &PgPool,
    verdicts: &[Verdict],
) -> Result<Option<Vec<(Verdict, bool)>>, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let locked: bool = sqlx::query_scalar!(
        r#"select pg_try_advisory_xact_lock($1) as "locked!""#,
        EVALUATOR_LOCK
    )
    .fetch_one(&mut *tx)
    .await?;
    if !locked {
        return Ok(None);
    }
    let mut changed = Vec::new();
    for v in verdicts {
        let previous: Option<bool> =
            sqlx::query_scalar!("select firing from alert_state where rule = $1", v.rule)
                .fetch_optional(&mut *tx)
                .await?;
        sqlx::query!(
            "insert into alert_state (rule, firing, value, threshold, since)
             values ($1, $2, $3, $4, now())
             on conflict (rule) do update set
                 firing = excluded.firing, value = excluded.value, threshold = excluded.threshold,
                 since = case when alert_state.firing = excluded.firing then alert_state.since else now() end",
            v.rule,
            v.firing,
            v.value,
            v.threshold
        )
        .execute(&mut *tx)
        .await?;
        if previous.unwrap_or(false) != v.firing {
            changed.push((v.clone(), v.firing));
        }
    }
    tx.commit().await?;
    Ok(Some(changed))
}

async fn announce(client: &reqwest::Client, webhook: Option<&str>, v: &Verdict, firing: bool) {
    let text = if firing {
        warn!(
            rule = v.rule,
            value = v.value,
            threshold = v.threshold,
            "alert firing"
        );
        format!(
            ":rotating_light: LPS alert {} firing: {:.2} (threshold {:.2})",
            v.rule, v.value, v.threshold
        )
    } else {
        info!(rule = v.rule, value = v.value, "alert resolved");
        format!(
            ":white_check_mark: LPS alert {} resolved: {:.2}",
            v.rule, v.value
        )
    };
    let Some(url) = webhook else { return };
    let sent = client.post(url).json(&SlackMessage { text }).send().await;
    match sent.map(|r| r.status()) {
        Ok(status) if status.is_success() => {}
        // NB: never log the URL: incoming-webhook URLs are secrets.
        Ok(status) => warn!(rule = v.rule, %status, "alert webhook refused the message"),
        Err(e) => warn!(rule = v.rule, error = %e.without_url(), "alert webhook unreachable"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{queue::QueueOps, search::FleetOps};

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
                malls: vec![],
            },
            fleet: FleetOps {
                nodes_connected: 0,
                free_slots: 0,
                ports_total,
                ports_available,
                blocks_last_hour: 0,
                block_ended_sessions_6h: 0,
                malls: vec![],
            },
        }
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
}
