//! Prometheus metrics of the coordinator, served at `/metrics`.
//!
//! Two kinds: deployment-wide gauges refreshed from the ops snapshot (the database is the
//! truth, so every replica reports the same figures — aggregate them with `max`), and
//! per-replica event counters and histograms recorded where things happen (claims, reports).
//! Labels are bounded: mall ids, states, outcomes, alert rule names; never tokens, URLs or
//! product names.

use std::sync::atomic::AtomicU64;

use prometheus_client::{
    encoding::{EncodeLabelSet, text::encode},
    metrics::{counter::Counter, family::Family, gauge::Gauge, histogram::Histogram},
    registry::Registry,
};

use lps_proto::model::ErrorClass;
use lps_telemetry::exposition::{self, Format};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabels {
    pub state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MallLabels {
    pub mall: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MallStateLabels {
    pub mall: String,
    pub state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MallOutcomeLabels {
    pub mall: String,
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReportLabels {
    pub kind: String,
    pub status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    pub outcome: String,
}

/// The outcomes of delivery attempts (`deliveries_total`): delivered, failed and retried
/// later, dead after the last attempt, the claim expired before the outcome was recorded,
/// or the outcome not recorded (the database failed).
pub const DELIVERY_OUTCOMES: [&str; 5] = ["delivered", "retry", "dead", "claim_lost", "unrecorded"];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RuleLabels {
    pub rule: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GrpcLabels {
    pub method: String,
    pub code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MethodLabels {
    pub method: String,
}

type FGauge = Gauge<f64, AtomicU64>;

/// The outcomes of finished attempts besides the error classes (`job_duration_seconds`).
const OUTCOMES: [&str; 2] = ["found", "not_found"];

// The label values each family is created with, owned here: the modules that count them
// check in their tests that their own names are these (`retention::Kind`, the scheduler's
// run outcomes, `schedule::rules::Reason`).

/// `retention_deleted{kind}`: the retention sweeps' kinds, in sweep order.
pub const RETENTION_KINDS: [&str; 8] = [
    "searches",
    "jobs",
    "history_thin",
    "history",
    "ip_sessions",
    "bot_detections",
    "deliveries",
    "node_sessions",
];

/// `schedule_runs{outcome}`: what became of a due schedule run: started, skipped (it could
/// not start: the reason is on the schedule), retry (the database failed; tried at the next
/// pass), claim_lost (another replica took the schedule over), unrecorded.
pub const SCHEDULE_RUN_OUTCOMES: [&str; 5] =
    ["started", "skipped", "retry", "claim_lost", "unrecorded"];

/// `profile_reloads{outcome}`: what became of an edit of the profile directory: applied
/// (sent to the nodes) or refused (invalid; the loaded set is kept).
pub const PROFILE_RELOAD_OUTCOMES: [&str; 2] = ["applied", "refused"];

/// `price_moves{reason}`: why a schedule evaluation found a price move.
pub const PRICE_MOVE_REASONS: [&str; 2] = ["below_target", "moved"];

/// Every metric of the coordinator. Cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    pub jobs: Family<StateLabels, Gauge>,
    pub schedules: Family<StateLabels, Gauge>,
    pub mall_jobs: Family<MallStateLabels, Gauge>,
    pub oldest_queued_age: FGauge,
    pub dead_last_hour: Gauge,
    pub stuck_running: Gauge,
    pub deadline_kills_last_hour: Gauge,
    pub cost_usd_last_hour: FGauge,
    pub spend_cap_hourly_usd: FGauge,
    pub spend_capped: Gauge,
    pub mall_spend_usd_last_hour: Family<MallLabels, FGauge>,
    pub mall_spend_cap_hourly_usd: Family<MallLabels, FGauge>,
    pub mall_spend_capped: Family<MallLabels, Gauge>,
    pub nodes_connected: Gauge,
    pub nodes_quarantined: Gauge,
    pub node_free_slots: Gauge,
    pub proxy_ports: Family<StateLabels, Gauge>,
    pub proxy_ports_available: Gauge,
    pub proxy_ports_available_min: Gauge,
    pub mall_proxy_ports_available: Family<MallLabels, Gauge>,
    pub mall_proxy_ports_cooling: Family<MallLabels, Gauge>,
    pub mall_proxy_ports_available_ratio: Family<MallLabels, FGauge>,
    pub blocks_last_hour: Gauge,
    pub block_ended_sessions_6h: Gauge,
    pub mall_layout_share_15m: Family<MallLabels, FGauge>,
    pub alert_firing: Family<RuleLabels, Gauge>,
    pub outbox_pending: Gauge,
    pub outbox_dead: Gauge,
    pub deliveries: Family<OutcomeLabels, Counter>,
    pub claims: Counter,
    pub pickup_latency: Histogram,
    pub job_duration: Family<MallOutcomeLabels, Histogram>,
    pub reports: Family<ReportLabels, Counter>,
    pub bytes: Counter,
    pub cost_usd: Counter<f64, AtomicU64>,
    pub blocks: Counter,
    pub layout_failures: Family<MallLabels, Counter>,
    pub node_streams: Gauge,
    pub grpc_requests: Family<GrpcLabels, Counter>,
    pub grpc_request_duration: Family<MethodLabels, Histogram>,
    pub db_pool_connections: Family<StateLabels, Gauge>,
    pub db_pool_max_connections: Gauge,
    pub database_reachable: Gauge,
    pub database_writable: Gauge,
    pub parked_reports: Counter,
    pub retention_deleted: Family<KindLabels, Counter>,
    pub retention_sweep_duration: Histogram,
    pub schedule_runs: Family<OutcomeLabels, Counter>,
    pub price_moves: Family<ReasonLabels, Counter>,
    pub profile_reloads: Family<OutcomeLabels, Counter>,
    /// 1 while the profile directory holds an edit this replica refused.
    pub profile_edit_refused: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("lps");
        let jobs = Family::<StateLabels, Gauge>::default();
        registry.register("jobs", "Jobs per state (deployment-wide)", jobs.clone());
        let schedules = Family::<StateLabels, Gauge>::default();
        registry.register(
            "schedules",
            "Schedules (watchlists) per state: active, paused, waiting (due, the previous run unfinished), failing (the last due run could not start); deployment-wide",
            schedules.clone(),
        );
        let mall_jobs = Family::<MallStateLabels, Gauge>::default();
        registry.register(
            "mall_jobs",
            "Queued and running jobs per mall (deployment-wide)",
            mall_jobs.clone(),
        );
        let oldest_queued_age = FGauge::default();
        registry.register(
            "oldest_queued_age_seconds",
            "Age of the oldest queued job",
            oldest_queued_age.clone(),
        );
        let dead_last_hour = Gauge::default();
        registry.register(
            "dead_last_hour",
            "Jobs that went dead in the last hour",
            dead_last_hour.clone(),
        );
        let stuck_running = Gauge::default();
        registry.register(
            "stuck_running",
            "Running jobs whose lease expired or that are past their deadline",
            stuck_running.clone(),
        );
        let deadline_kills_last_hour = Gauge::default();
        registry.register(
            "deadline_kills_last_hour",
            "Runs ended at the hard deadline in the last hour",
            deadline_kills_last_hour.clone(),
        );
        let cost_usd_last_hour = FGauge::default();
        registry.register(
            "cost_usd_last_hour",
            "What every attempt cost in the rolling hour (USD): the spend the deployment's cap compares",
            cost_usd_last_hour.clone(),
        );
        let spend_cap_hourly_usd = FGauge::default();
        registry.register(
            "spend_cap_hourly_usd",
            "Deployment-wide cap on spend per rolling hour (USD; 0: none)",
            spend_cap_hourly_usd.clone(),
        );
        let spend_capped = Gauge::default();
        registry.register(
            "spend_capped",
            "1 while the deployment's spend over the last hour has reached its cap: no job is claimed",
            spend_capped.clone(),
        );
        let mall_spend_usd_last_hour = Family::<MallLabels, FGauge>::default();
        registry.register(
            "mall_spend_usd_last_hour",
            "What a mall's attempts cost in the rolling hour (USD)",
            mall_spend_usd_last_hour.clone(),
        );
        let mall_spend_cap_hourly_usd = Family::<MallLabels, FGauge>::default();
        registry.register(
            "mall_spend_cap_hourly_usd",
            "A mall's cap on spend per rolling hour (USD; 0: none)",
            mall_spend_cap_hourly_usd.clone(),
        );
        let mall_spend_capped = Family::<MallLabels, Gauge>::default();
        registry.register(
            "mall_spend_capped",
            "1 while a mall's spend over the last hour has reached its cap: none of its jobs is claimed",
            mall_spend_capped.clone(),
        );
        let nodes_connected = Gauge::default();
        registry.register(
            "nodes_connected",
            "Connected crawler nodes (deployment-wide)",
            nodes_connected.clone(),
        );
        let nodes_quarantined = Gauge::default();
        registry.register(
            "nodes_quarantined",
            "Crawler nodes quarantined now for dropping their jobs again and again: no new assignments until their back-off ends (deployment-wide; lpsctl nodes)",
            nodes_quarantined.clone(),
        );
        let node_free_slots = Gauge::default();
        registry.register(
            "node_free_slots",
            "Free slots of connected, non-draining nodes",
            node_free_slots.clone(),
        );
        let proxy_ports = Family::<StateLabels, Gauge>::default();
        registry.register("proxy_ports", "Proxy ports per state", proxy_ports.clone());
        let proxy_ports_available = Gauge::default();
        registry.register(
            "proxy_ports_available",
            "Proxy ports usable by some mall now (per-mall cooldowns after blocks not counted; see mall_proxy_ports_available)",
            proxy_ports_available.clone(),
        );
        let proxy_ports_available_min = Gauge::default();
        registry.register(
            "proxy_ports_available_min",
            "The fewest proxy ports available for one enabled mall (what a crawl can count on)",
            proxy_ports_available_min.clone(),
        );
        let mall_proxy_ports_available = Family::<MallLabels, Gauge>::default();
        registry.register(
            "mall_proxy_ports_available",
            "Proxy ports the ledger would lease for a mall now (not leased, resting or cooling for it)",
            mall_proxy_ports_available.clone(),
        );
        let mall_proxy_ports_cooling = Family::<MallLabels, Gauge>::default();
        registry.register(
            "mall_proxy_ports_cooling",
            "Proxy ports cooling down for a mall (for every mall, or for this one after a block)",
            mall_proxy_ports_cooling.clone(),
        );
        let mall_proxy_ports_available_ratio = Family::<MallLabels, FGauge>::default();
        registry.register(
            "mall_proxy_ports_available_ratio",
            "Share (0..1) of all proxy ports the ledger would lease for an enabled mall now; the ports alert fires on the lowest, naming its mall",
            mall_proxy_ports_available_ratio.clone(),
        );
        let blocks_last_hour = Gauge::default();
        registry.register(
            "blocks_last_hour",
            "Bot blocks detected in the last hour",
            blocks_last_hour.clone(),
        );
        let block_ended_sessions_6h = Gauge::default();
        registry.register(
            "block_ended_sessions_6h",
            "IP sessions ended by a block in the last 6 hours",
            block_ended_sessions_6h.clone(),
        );
        let mall_layout_share_15m = Family::<MallLabels, FGauge>::default();
        registry.register(
            "mall_layout_share_15m",
            "Share of a mall's finished attempts in the last 15 minutes that failed as layout",
            mall_layout_share_15m.clone(),
        );
        let alert_firing = Family::<RuleLabels, Gauge>::default();
        registry.register(
            "alert_firing",
            "1 while an alert rule fires",
            alert_firing.clone(),
        );
        let claims = Counter::default();
        registry.register("claims", "Jobs claimed by this replica", claims.clone());
        let pickup_latency = Histogram::new([
            0.001, 0.002, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0, 300.0,
        ]);
        registry.register(
            "pickup_latency_seconds",
            "Enqueue to claim, for first attempts",
            pickup_latency.clone(),
        );
        let job_duration = Family::<MallOutcomeLabels, Histogram>::new_with_constructor(|| {
            Histogram::new([0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0])
        });
        registry.register(
            "job_duration_seconds",
            "Run time of finished attempts",
            job_duration.clone(),
        );
        let reports = Family::<ReportLabels, Counter>::default();
        registry.register(
            "reports",
            "Node reports by kind and ack status",
            reports.clone(),
        );
        let bytes = Counter::default();
        registry.register("bytes", "Proxy bytes reported by nodes", bytes.clone());
        let cost_usd = Counter::<f64, AtomicU64>::default();
        registry.register(
            "cost_usd",
            "Crawl cost reported by nodes (USD)",
            cost_usd.clone(),
        );
        let blocks = Counter::default();
        registry.register(
            "blocks",
            "Bot blocks reported to this replica",
            blocks.clone(),
        );
        let layout_failures = Family::<MallLabels, Counter>::default();
        registry.register(
            "layout_failures",
            "Attempts reported to this replica that failed as layout (the mall's markup changed)",
            layout_failures.clone(),
        );
        let node_streams = Gauge::default();
        registry.register(
            "node_streams",
            "Node streams held by this replica",
            node_streams.clone(),
        );
        let grpc_requests = Family::<GrpcLabels, Counter>::default();
        registry.register(
            "grpc_requests",
            "gRPC calls this replica answered, by method and status code",
            grpc_requests.clone(),
        );
        let grpc_request_duration = Family::<MethodLabels, Histogram>::new_with_constructor(|| {
            Histogram::new([
                0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
            ])
        });
        registry.register(
            "grpc_request_duration_seconds",
            "Time from a gRPC call's arrival to its response head, by method",
            grpc_request_duration.clone(),
        );
        let db_pool_connections = Family::<StateLabels, Gauge>::default();
        registry.register(
            "db_pool_connections",
            "This replica's PostgreSQL pool connections, idle or in use",
            db_pool_connections.clone(),
        );
        let db_pool_max_connections = Gauge::default();
        registry.register(
            "db_pool_max_connections",
            "The pool's size limit (LPS_DB_MAX_CONNECTIONS)",
            db_pool_max_connections.clone(),
        );
        let database_reachable = Gauge::default();
        registry.register(
            "database_reachable",
            "1 while this replica's database probe reaches PostgreSQL (gRPC health follows it)",
            database_reachable.clone(),
        );
        database_reachable.set(1);
        let database_writable = Gauge::default();
        registry.register(
            "database_writable",
            "1 while this replica's database probe can write (its heartbeat row); 0 while PostgreSQL is unreachable, read-only, out of disk or timing out (gRPC health follows it)",
            database_writable.clone(),
        );
        database_writable.set(1);
        let parked_reports = Counter::default();
        registry.register(
            "node_reports_parked",
            "Node reports a database fault kept from being written: kept unacked on their stream and written once the database takes writes",
            parked_reports.clone(),
        );
        let retention_deleted = Family::<KindLabels, Counter>::default();
        registry.register(
            "retention_deleted",
            "Rows the retention sweeps of this replica deleted, by kind (a job counts without the attempts, offers and reports deleted with it)",
            retention_deleted.clone(),
        );
        for kind in RETENTION_KINDS {
            let _ = retention_deleted.get_or_create(&KindLabels { kind: kind.into() });
        }
        let retention_sweep_duration =
            Histogram::new([0.01, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0]);
        registry.register(
            "retention_sweep_duration_seconds",
            "Duration of the retention sweeps this replica ran (it held the sweep lock)",
            retention_sweep_duration.clone(),
        );
        let outbox_pending = Gauge::default();
        registry.register(
            "outbox_pending",
            "Delivery events waiting for an attempt or in one (deployment-wide)",
            outbox_pending.clone(),
        );
        let outbox_dead = Gauge::default();
        registry.register(
            "outbox_dead",
            "Delivery events dead after their last attempt (deployment-wide; lpsctl deliveries --dead)",
            outbox_dead.clone(),
        );
        let deliveries = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "deliveries",
            "Delivery attempts this replica made, by outcome",
            deliveries.clone(),
        );
        for outcome in DELIVERY_OUTCOMES {
            let _ = deliveries.get_or_create(&OutcomeLabels {
                outcome: outcome.into(),
            });
        }
        let schedule_runs = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "schedule_runs",
            "Due schedule runs this replica handled, by outcome (started, skipped, retry, claim_lost, unrecorded)",
            schedule_runs.clone(),
        );
        for outcome in SCHEDULE_RUN_OUTCOMES {
            let _ = schedule_runs.get_or_create(&OutcomeLabels {
                outcome: outcome.into(),
            });
        }
        let price_moves = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "price_moves",
            "Price moves this replica's schedule evaluations found, by reason (a move with two reasons counts under each; events are per destination besides)",
            price_moves.clone(),
        );
        for reason in PRICE_MOVE_REASONS {
            let _ = price_moves.get_or_create(&ReasonLabels {
                reason: reason.into(),
            });
        }
        let profile_reloads = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "profile_reloads",
            "Edits of the profile directory this replica read, by outcome (applied, refused)",
            profile_reloads.clone(),
        );
        for outcome in PROFILE_RELOAD_OUTCOMES {
            let _ = profile_reloads.get_or_create(&OutcomeLabels {
                outcome: outcome.into(),
            });
        }
        let profile_edit_refused = Gauge::default();
        registry.register(
            "profile_edit_refused",
            "1 while the profile directory holds an edit this replica refused (lpsctl ops shows the error; the loaded profiles are kept)",
            profile_edit_refused.clone(),
        );
        Self {
            registry,
            jobs,
            schedules,
            mall_jobs,
            oldest_queued_age,
            dead_last_hour,
            stuck_running,
            deadline_kills_last_hour,
            cost_usd_last_hour,
            spend_cap_hourly_usd,
            spend_capped,
            mall_spend_usd_last_hour,
            mall_spend_cap_hourly_usd,
            mall_spend_capped,
            nodes_connected,
            nodes_quarantined,
            node_free_slots,
            proxy_ports,
            proxy_ports_available,
            proxy_ports_available_min,
            mall_proxy_ports_available,
            mall_proxy_ports_cooling,
            mall_proxy_ports_available_ratio,
            blocks_last_hour,
            block_ended_sessions_6h,
            mall_layout_share_15m,
            alert_firing,
            outbox_pending,
            outbox_dead,
            deliveries,
            claims,
            pickup_latency,
            job_duration,
            reports,
            bytes,
            cost_usd,
            blocks,
            layout_failures,
            node_streams,
            grpc_requests,
            grpc_request_duration,
            db_pool_connections,
            db_pool_max_connections,
            database_reachable,
            database_writable,
            parked_reports,
            retention_deleted,
            retention_sweep_duration,
            schedule_runs,
            price_moves,
            profile_reloads,
            profile_edit_refused,
        }
    }

    /// Counts one due schedule run's outcome (one of [`SCHEDULE_RUN_OUTCOMES`]).
    pub fn record_schedule_run(&self, outcome: &str) {
        self.schedule_runs
            .get_or_create(&OutcomeLabels {
                outcome: outcome.into(),
            })
            .inc();
    }

    /// Counts one price move that fired for `reason` (one of [`PRICE_MOVE_REASONS`]).
    pub fn record_price_move(&self, reason: &str) {
        self.price_moves
            .get_or_create(&ReasonLabels {
                reason: reason.into(),
            })
            .inc();
    }

    /// Counts `rows` deleted by one retention batch of `kind`.
    pub fn record_retention_batch(&self, kind: &str, rows: u64) {
        self.retention_deleted
            .get_or_create(&KindLabels { kind: kind.into() })
            .inc_by(rows);
    }

    /// Records one finished retention sweep.
    pub fn record_retention_sweep(&self, elapsed: std::time::Duration) {
        self.retention_sweep_duration.observe(elapsed.as_secs_f64());
    }

    /// Creates the per-mall event series of `malls` at 0, so that `rate()` and
    /// `increase()` see the first event (a series that appears with its first event has no
    /// earlier sample to compare with).
    pub fn init_malls<'a>(&self, malls: impl IntoIterator<Item = &'a str>) {
        for mall in malls {
            let _ = self
                .layout_failures
                .get_or_create(&MallLabels { mall: mall.into() });
            // Every error class the wire knows (their numbers are small).
            let classes = (1..64).filter_map(|n| ErrorClass::try_from(n).ok());
            for outcome in OUTCOMES.into_iter().chain(classes.map(ErrorClass::as_str)) {
                let _ = self.job_duration.get_or_create(&MallOutcomeLabels {
                    mall: mall.into(),
                    outcome: outcome.into(),
                });
            }
        }
    }

    /// Sets the pool gauges from `pool` now (at each scrape).
    pub fn observe_pool(&self, pool: &sqlx::PgPool) {
        let idle = i64::try_from(pool.num_idle()).unwrap_or(i64::MAX);
        let size = i64::from(pool.size());
        for (state, n) in [("idle", idle), ("in_use", (size - idle).max(0))] {
            self.db_pool_connections
                .get_or_create(&StateLabels {
                    state: state.into(),
                })
                .set(n);
        }
        self.db_pool_max_connections
            .set(i64::from(pool.options().get_max_connections()));
    }

    /// Counts one delivery attempt's outcome (one of [`DELIVERY_OUTCOMES`]).
    pub fn record_delivery(&self, outcome: &str) {
        self.deliveries
            .get_or_create(&OutcomeLabels {
                outcome: outcome.into(),
            })
            .inc();
    }

    /// The exposition in `format`, with the process and build-info families.
    pub fn encode_as(&self, format: Format) -> String {
        let mut out = String::new();
        // NB: encoding into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        exposition::render(&out, "coordinator", env!("CARGO_PKG_VERSION"), format)
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> String {
        self.encode_as(Format::OpenMetrics)
    }
}

/// One unit of a gauge for as long as it lives (`node_streams`: one per stream task).
#[derive(Debug)]
pub struct Held(Gauge);

impl Held {
    pub fn new(gauge: &Gauge) -> Self {
        gauge.inc();
        Self(gauge.clone())
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.0.dec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposition_has_the_documented_names() {
        let m = Metrics::new();
        m.claims.inc();
        m.pickup_latency.observe(0.002);
        m.jobs
            .get_or_create(&StateLabels {
                state: "queued".into(),
            })
            .set(3);
        let alpha = MallLabels {
            mall: "testmall-alpha".into(),
        };
        m.layout_failures.get_or_create(&alpha).inc();
        m.mall_layout_share_15m.get_or_create(&alpha).set(0.5);
        let text = m.encode();
        for name in [
            "lps_jobs{state=\"queued\"} 3",
            "lps_claims_total 1",
            "lps_pickup_latency_seconds_bucket",
            "lps_node_free_slots",
            "lps_proxy_ports_available",
            "lps_layout_failures_total{mall=\"testmall-alpha\"} 1",
            "lps_mall_layout_share_15m{mall=\"testmall-alpha\"} 0.5",
            "lps_spend_capped 0",
            "lps_spend_cap_hourly_usd 0.0",
        ] {
            assert!(text.contains(name), "missing {name} in\n{text}");
        }
    }
}
