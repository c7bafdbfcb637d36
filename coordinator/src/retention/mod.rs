//! Retention: deletes rows older than their configured age, one kind of row per [`Kind`]
//! (DESIGN §6, "Retention"). Off unless an age is set: every setting is unset by default and
//! then nothing of that kind is ever deleted.
//!
//! A sweep runs every [`RetentionConfig::interval`] on whichever replica wins an
//! advisory lock held by its connection (`pg_try_advisory_lock`, [`SWEEP_LOCK`]); the others
//! skip that round. It holds that one connection for the whole sweep and runs each kind's rule as
//! bounded batches: one autocommit statement per batch that scans the next
//! [`RetentionConfig::batch`] rows in key-range order (age column, id) after the last row
//! the previous batch scanned — an ordered index read that stops at the limit, so rows a
//! rule keeps are read once per sweep — and deletes those the rule lets go, with
//! `FOR UPDATE … SKIP LOCKED` so a row another transaction holds is left for the next
//! sweep and nobody waits for a sweep. No claim
//! reads or locks what a sweep deletes: claims lock queued jobs, sweeps only finished ones.
//!
//! What each rule keeps is written in its SQL file (`retention/sql/`; the searches and jobs
//! rules' are the queue's `queue/sql/retire_searches.sql` and `retire_finished.sql`, run
//! through [`queue::embedded`] because the queue is the one writer of `search_request` and
//! `job`); in short, nothing an
//! unfinished search still needs is deleted: a search goes only when none of its jobs is
//! queued or running and none of its deliveries is undelivered, a job only when it is finished and no kept search refers to it, the
//! newest found result of a product and mall (which a Search with any `max_age` answers
//! from) and a still-cached "not found" stay, and each product's newest price-history
//! entry survives any age. Searches are swept before jobs ([`Kind::ALL`] is the order),
//! because a search's items refer to its jobs without a cascade.
//!
//! Cancellation-safe: a sweep stops between batches when cancelled; a batch is one
//! statement, so it either committed or left nothing.
//!
//! To add a rule: a [`Kind`] variant with its arms in
//! [`Kind::as_str`], [`Kind::setting`] and `Kind::delete_batch`, its place in
//! [`Kind::ALL`], a field in [`RetentionArgs`] read in [`RetentionArgs::validate`], and a
//! `sql/<kind>.sql` of the same shape as the others: parameters age (ms), batch size and
//! the (time, id) cursor; it returns the rows deleted and scanned and the last scanned key.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgPool, pool::PoolConnection};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument as _, info, info_span, warn};

use crate::{node_session, queue, settings::ConfigError};

/// The advisory lock one sweep holds ('lps-rtn'): one replica sweeps at a time.
pub const SWEEP_LOCK: i64 = 0x6c70_732d_7274_6e00;
/// Default time between sweeps.
pub const DEFAULT_INTERVAL: &str = "10m";
/// Default most rows one batch deletes.
pub const DEFAULT_BATCH: u32 = 1000;
/// No retention age may be shorter: a shorter one is a typo, not a policy.
pub const MIN_AGE: Duration = Duration::from_secs(3600);

/// A kind of row with its own retention age, swept in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Final searches with their items.
    Searches,
    /// Finished jobs with their attempts, offers, stale reports and negative-cache rows.
    Jobs,
    /// Price history thinned to one entry per product, mall and day.
    HistoryThin,
    /// Price history entries.
    History,
    /// IP-session ends.
    IpSessions,
    /// Bot-detection records.
    BotDetections,
    /// Delivered outbox rows (pending and dead ones are never deleted).
    Deliveries,
    /// Node streams' rows (`node_session`) ended long ago.
    NodeSessions,
}

/// What one batch did: rows deleted, rows scanned (at most the batch size; fewer means the
/// rule has reached its age limit) and the key of the last one scanned (the next cursor).
#[derive(Debug)]
struct Batch {
    deleted: i64,
    scanned: i64,
    last_at: Option<DateTime<Utc>>,
    last_id: Option<i64>,
}

impl From<node_session::Retired> for Batch {
    fn from(r: node_session::Retired) -> Self {
        Self {
            deleted: r.deleted,
            scanned: r.scanned,
            last_at: r.last_at,
            last_id: r.last_id,
        }
    }
}

impl From<queue::embedded::Retired> for Batch {
    fn from(r: queue::embedded::Retired) -> Self {
        Self {
            deleted: r.deleted,
            scanned: r.scanned,
            last_at: r.last_at,
            last_id: r.last_id,
        }
    }
}

impl Kind {
    /// Every kind, in sweep order (searches before the jobs their items refer to).
    pub const ALL: [Self; 8] = [
        Self::Searches,
        Self::Jobs,
        Self::HistoryThin,
        Self::History,
        Self::IpSessions,
        Self::BotDetections,
        Self::Deliveries,
        Self::NodeSessions,
    ];

    /// The metric label and log name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Searches => "searches",
            Self::Jobs => "jobs",
            Self::HistoryThin => "history_thin",
            Self::History => "history",
            Self::IpSessions => "ip_sessions",
            Self::BotDetections => "bot_detections",
            Self::Deliveries => "deliveries",
            Self::NodeSessions => "node_sessions",
        }
    }

    /// The setting that gives this kind its age.
    pub fn setting(self) -> &'static str {
        match self {
            Self::Searches => "LPS_RETAIN_SEARCHES",
            Self::Jobs => "LPS_RETAIN_JOBS",
            Self::HistoryThin => "LPS_RETAIN_HISTORY_DAILY_AFTER",
            Self::History => "LPS_RETAIN_HISTORY",
            Self::IpSessions => "LPS_RETAIN_IP_SESSIONS",
            Self::BotDetections => "LPS_RETAIN_BOT_DETECTIONS",
            Self::Deliveries => "LPS_RETAIN_DELIVERIES",
            Self::NodeSessions => "LPS_RETAIN_NODE_SESSIONS",
        }
    }

    /// Scans the next `limit` rows older than `age_ms` after the cursor and deletes those
    /// the rule lets go.
    async fn delete_batch(
        self,
        conn: &mut PgConnection,
        age_ms: i64,
        limit: i64,
        (after_at, after_id): (DateTime<Utc>, i64),
    ) -> Result<Batch, sqlx::Error> {
        macro_rules! rule {
            ($file:literal) => {
                sqlx::query_file_as!(Batch, $file, age_ms, limit, after_at, after_id)
                    .fetch_one(conn)
                    .await
            };
        }
        match self {
            // NB: the queue is the one writer of `search_request` and `job`; its statements
            // run on this sweep's connection like the others.
            Self::Searches => {
                queue::embedded::retire_searches(conn, age_ms, limit, (after_at, after_id))
                    .await
                    .map(Batch::from)
            }
            Self::Jobs => {
                queue::embedded::retire_finished(conn, age_ms, limit, (after_at, after_id))
                    .await
                    .map(Batch::from)
            }
            Self::HistoryThin => rule!("src/retention/sql/history_thin.sql"),
            Self::History => rule!("src/retention/sql/history.sql"),
            Self::IpSessions => rule!("src/retention/sql/ip_sessions.sql"),
            Self::BotDetections => rule!("src/retention/sql/bot_detections.sql"),
            Self::Deliveries => rule!("src/retention/sql/deliveries.sql"),
            // NB: `node_session/` is the one writer of its table.
            Self::NodeSessions => {
                node_session::retire_ended(conn, age_ms, limit, (after_at, after_id))
                    .await
                    .map(Batch::from)
            }
        }
    }
}

/// The retention settings (flattened into the coordinator's). Ages are durations (`30d`,
/// `12h`) or `off`; unset is off.
#[derive(Debug, Clone, clap::Args)]
pub struct RetentionArgs {
    /// Delete finished jobs (with their attempts, page evidence, offers and stale reports)
    /// this long after they finished, once no kept search refers to them; a product and
    /// mall's newest found result and a still-cached "not found" stay. Needs
    /// LPS_RETAIN_SEARCHES (every job belongs to a search). Unset/off: kept forever.
    #[arg(long, env = "LPS_RETAIN_JOBS")]
    pub retain_jobs: Option<String>,
    /// Delete final searches (with their items) this long after they were made; a search
    /// with a queued or running job stays. Price history keeps its entries. Unset/off: kept.
    #[arg(long, env = "LPS_RETAIN_SEARCHES")]
    pub retain_searches: Option<String>,
    /// Delete price-history entries observed longer ago than this; each product's newest
    /// entry always stays. Unset/off: kept forever.
    #[arg(long, env = "LPS_RETAIN_HISTORY")]
    pub retain_history: Option<String>,
    /// Thin price history observed longer ago than this to one entry per product, lowest
    /// mall and UTC day (the day's newest complete entry, else its newest). Shorter than
    /// LPS_RETAIN_HISTORY when both are set. Unset/off: every entry kept.
    #[arg(long, env = "LPS_RETAIN_HISTORY_DAILY_AFTER")]
    pub retain_history_daily_after: Option<String>,
    /// Delete IP-session ends (the per-IP budget's data) older than this. Unset/off: kept.
    #[arg(long, env = "LPS_RETAIN_IP_SESSIONS")]
    pub retain_ip_sessions: Option<String>,
    /// Delete bot-detection records older than this. Unset/off: kept.
    #[arg(long, env = "LPS_RETAIN_BOT_DETECTIONS")]
    pub retain_bot_detections: Option<String>,
    /// Delete delivered outbox rows this long after their delivery (a search's deliveries
    /// also go with the search). Pending and dead ones stay, and so does their search.
    /// Unset/off: kept with their search.
    #[arg(long, env = "LPS_RETAIN_DELIVERIES")]
    pub retain_deliveries: Option<String>,
    /// Delete node streams' rows (`lpsctl nodes`' history) this long after the stream ended
    /// (a live stream's row is never deleted; a drain mark goes with its row). Node ids come
    /// and go with pods, so the table otherwise grows with every pod. Unset/off: kept.
    #[arg(long, env = "LPS_RETAIN_NODE_SESSIONS")]
    pub retain_node_sessions: Option<String>,
    /// Time between retention sweeps (one replica sweeps at a time).
    #[arg(long, env = "LPS_RETENTION_INTERVAL", default_value = DEFAULT_INTERVAL)]
    pub retention_interval: String,
    /// Most rows one retention statement deletes (its transaction's size).
    #[arg(long, env = "LPS_RETENTION_BATCH", default_value_t = DEFAULT_BATCH)]
    pub retention_batch: u32,
}

/// One kind's age.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    pub kind: Kind,
    pub age: Duration,
}

/// The validated retention settings: the rules in force, in sweep order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetentionConfig {
    pub rules: Vec<Rule>,
    pub interval: Duration,
    pub batch: u32,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        Self {
            rules: Vec::new(),
            interval: crate::settings::default_duration(DEFAULT_INTERVAL),
            batch: DEFAULT_BATCH,
        }
    }
}

fn bad(setting: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError {
        setting,
        reason: reason.into(),
    }
}

/// An age setting: `None` for unset, empty or `off`; else a duration of at least
/// [`MIN_AGE`].
fn age(setting: &'static str, raw: Option<&str>) -> Result<Option<Duration>, ConfigError> {
    let raw = raw.map(str::trim).unwrap_or_default();
    if raw.is_empty() || raw.eq_ignore_ascii_case("off") {
        return Ok(None);
    }
    let age = humantime::parse_duration(raw)
        .map_err(|e| bad(setting, format!("{e} (write e.g. 30d, 12h, or off)")))?;
    if age < MIN_AGE {
        return Err(bad(setting, "must be at least 1h, or off"));
    }
    if i64::try_from(age.as_millis()).is_err() {
        return Err(bad(setting, "too long"));
    }
    Ok(Some(age))
}

impl RetentionArgs {
    pub fn validate(&self) -> Result<RetentionConfig, ConfigError> {
        let of = |kind: Kind| -> Result<Option<Duration>, ConfigError> {
            let raw = match kind {
                Kind::Searches => &self.retain_searches,
                Kind::Jobs => &self.retain_jobs,
                Kind::HistoryThin => &self.retain_history_daily_after,
                Kind::History => &self.retain_history,
                Kind::IpSessions => &self.retain_ip_sessions,
                Kind::BotDetections => &self.retain_bot_detections,
                Kind::Deliveries => &self.retain_deliveries,
                Kind::NodeSessions => &self.retain_node_sessions,
            };
            age(kind.setting(), raw.as_deref())
        };
        let mut rules = Vec::new();
        for kind in Kind::ALL {
            if let Some(age) = of(kind)? {
                rules.push(Rule { kind, age });
            }
        }
        let age_of = |kind: Kind| rules.iter().find(|r| r.kind == kind).map(|r| r.age);
        if age_of(Kind::Jobs).is_some() && age_of(Kind::Searches).is_none() {
            return Err(bad(
                "LPS_RETAIN_JOBS",
                "needs LPS_RETAIN_SEARCHES: a job is kept while a search refers to it, and every job belongs to one",
            ));
        }
        if let (Some(thin), Some(keep)) = (age_of(Kind::HistoryThin), age_of(Kind::History))
            && thin >= keep
        {
            return Err(bad(
                "LPS_RETAIN_HISTORY_DAILY_AFTER",
                "must be shorter than LPS_RETAIN_HISTORY (entries older than that are deleted anyway)",
            ));
        }
        let interval = humantime::parse_duration(self.retention_interval.trim())
            .map_err(|e| bad("LPS_RETENTION_INTERVAL", format!("{e} (write e.g. 10m)")))?;
        if interval < Duration::from_secs(1) {
            return Err(bad("LPS_RETENTION_INTERVAL", "must be at least 1s"));
        }
        if !(1..=100_000).contains(&self.retention_batch) {
            return Err(bad("LPS_RETENTION_BATCH", "must be 1..=100000"));
        }
        Ok(RetentionConfig {
            rules,
            interval,
            batch: self.retention_batch,
        })
    }
}

/// What one sweep deleted, per kind in sweep order, and how long it took.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SweepReport {
    pub deleted: Vec<(Kind, u64)>,
    pub elapsed: Duration,
}

impl SweepReport {
    pub fn deleted(&self, kind: Kind) -> u64 {
        self.deleted
            .iter()
            .find(|(k, _)| *k == kind)
            .map_or(0, |(_, n)| *n)
    }

    pub fn total(&self) -> u64 {
        self.deleted.iter().map(|(_, n)| n).sum()
    }
}

/// One sweep over `config`'s rules, if this replica wins [`SWEEP_LOCK`]; `Ok(None)` when
/// another holds it. `on_batch` gets each batch's kind and rows deleted as it commits.
/// Stops between batches when `cancel` fires.
pub async fn sweep(
    pool: &PgPool,
    config: &RetentionConfig,
    cancel: &CancellationToken,
    mut on_batch: impl FnMut(Kind, u64),
) -> Result<Option<SweepReport>, sqlx::Error> {
    let started = Instant::now();
    let mut conn = pool.acquire().await?;
    let locked: bool = sqlx::query_scalar!(
        r#"select pg_try_advisory_lock($1) as "locked!""#,
        SWEEP_LOCK
    )
    .fetch_one(&mut *conn)
    .await?;
    if !locked {
        return Ok(None);
    }
    // NB: a sweep whose future is dropped mid-batch (an aborted task) returns the
    // connection to the pool still holding the lock; the pool closes its connections at
    // shutdown, which releases it. The loop only stops between batches (`cancel`).
    let result = sweep_locked(&mut conn, config, cancel, &mut on_batch).await;
    release(conn, result.is_ok()).await;
    let deleted = result?;
    Ok(Some(SweepReport {
        deleted,
        elapsed: started.elapsed(),
    }))
}

/// Gives the lock back; when that fails, or the sweep failed (the connection's state is then
/// unknown), the connection is closed instead, which releases it too.
async fn release(mut conn: PoolConnection<sqlx::Postgres>, healthy: bool) {
    if healthy
        && sqlx::query_scalar!(
            r#"select pg_advisory_unlock($1) as "unlocked!""#,
            SWEEP_LOCK
        )
        .fetch_one(&mut *conn)
        .await
        .unwrap_or(false)
    {
        return;
    }
    conn.close_on_drop();
}

async fn sweep_locked(
    conn: &mut PgConnection,
    config: &RetentionConfig,
    cancel: &CancellationToken,
    on_batch: &mut impl FnMut(Kind, u64),
) -> Result<Vec<(Kind, u64)>, sqlx::Error> {
    let limit = i64::from(config.batch);
    let mut deleted = Vec::with_capacity(config.rules.len());
    for rule in &config.rules {
        // NB: checked by validate (at most i64::MAX ms); a test's config may skip it.
        let age_ms = i64::try_from(rule.age.as_millis()).unwrap_or(i64::MAX);
        let mut cursor = (DateTime::<Utc>::UNIX_EPOCH, 0_i64);
        let mut total = 0_u64;
        while !cancel.is_cancelled() {
            let batch = rule.kind.delete_batch(conn, age_ms, limit, cursor).await?;
            let n = u64::try_from(batch.deleted).unwrap_or(0);
            total += n;
            on_batch(rule.kind, n);
            match (batch.last_at, batch.last_id) {
                (Some(at), Some(id)) if batch.scanned >= limit => cursor = (at, id),
                _ => break,
            }
        }
        deleted.push((rule.kind, total));
    }
    Ok(deleted)
}

/// Sweeps every `config.interval` until cancelled, counting deleted rows per kind and each
/// sweep's duration in `metrics`. A failed sweep is logged and tried again next interval.
pub async fn run(
    pool: PgPool,
    config: RetentionConfig,
    metrics: std::sync::Arc<crate::metrics::Metrics>,
    cancel: CancellationToken,
) {
    if config.rules.is_empty() {
        info!("retention off: no LPS_RETAIN_* age set");
        cancel.cancelled().await;
        return;
    }
    for rule in &config.rules {
        info!(kind = rule.kind.as_str(), setting = rule.kind.setting(), age = ?rule.age, "retention rule");
    }
    let mut tick = tokio::time::interval_at(
        tokio::time::Instant::now() + config.interval,
        config.interval,
    );
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            _ = tick.tick() => {}
        }
        let span = info_span!(parent: None, "retention.sweep");
        let swept = sweep(&pool, &config, &cancel, |kind, n| {
            metrics.record_retention_batch(kind.as_str(), n);
        })
        .instrument(span)
        .await;
        match swept {
            Ok(Some(report)) => {
                metrics.record_retention_sweep(report.elapsed);
                info!(
                    deleted = i64::try_from(report.total()).unwrap_or(i64::MAX),
                    elapsed = ?report.elapsed,
                    "retention sweep"
                );
            }
            Ok(None) => {}
            Err(e) => warn!(error = %e, "retention sweep failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;

    #[test]
    fn kinds_are_the_metric_labels() {
        let names: Vec<&str> = Kind::ALL.into_iter().map(Kind::as_str).collect();
        assert_eq!(names, crate::metrics::RETENTION_KINDS);
    }

    #[derive(Debug, clap::Parser)]
    struct Cli {
        #[command(flatten)]
        retention: RetentionArgs,
    }

    fn config(args: &[&str]) -> Result<RetentionConfig, ConfigError> {
        let mut argv = vec!["coordinator"];
        argv.extend_from_slice(args);
        Cli::try_parse_from(argv).unwrap().retention.validate()
    }

    #[test]
    fn off_by_default_and_rules_in_sweep_order() {
        assert_eq!(config(&[]).unwrap(), RetentionConfig::default());
        let c = config(&[
            "--retain-ip-sessions",
            "7d",
            "--retain-jobs",
            "30d",
            "--retain-searches",
            "30d",
            "--retain-history",
            "off",
        ])
        .unwrap();
        let kinds: Vec<Kind> = c.rules.iter().map(|r| r.kind).collect();
        assert_eq!(kinds, [Kind::Searches, Kind::Jobs, Kind::IpSessions]);
        assert_eq!(c.rules[1].age, Duration::from_secs(30 * 86_400));
    }

    #[test]
    fn bad_settings_are_named() {
        let setting = |args: &[&str]| config(args).unwrap_err().setting;
        assert_eq!(
            setting(&["--retain-jobs", "30 days please"]),
            "LPS_RETAIN_JOBS"
        );
        assert_eq!(setting(&["--retain-searches", "5m"]), "LPS_RETAIN_SEARCHES");
        assert_eq!(setting(&["--retain-jobs", "30d"]), "LPS_RETAIN_JOBS");
        assert_eq!(
            setting(&[
                "--retain-history",
                "30d",
                "--retain-history-daily-after",
                "60d"
            ]),
            "LPS_RETAIN_HISTORY_DAILY_AFTER"
        );
        assert_eq!(
            setting(&["--retain-deliveries", "10m"]),
            "LPS_RETAIN_DELIVERIES"
        );
        assert_eq!(setting(&["--retention-batch", "0"]), "LPS_RETENTION_BATCH");
        assert_eq!(
            setting(&["--retention-interval", "0s"]),
            "LPS_RETENTION_INTERVAL"
        );
        let e = config(&["--retain-bot-detections", "1x"]).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("invalid setting LPS_RETAIN_BOT_DETECTIONS: "),
            "{e}"
        );
    }
}
