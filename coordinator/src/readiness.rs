//! Readiness: whether this replica can serve, kept current by a background database probe.
//!
//! Every [`PROBE_INTERVAL`] the probe takes a pooled connection and WRITES: it upserts this
//! replica's heartbeat row in `write_probe` (migration 0028; the same statement deletes
//! rows no replica wrote for a day; the server's `statement_timeout` for it is 800 ms, so a
//! write stuck on a lock ends there), the two together bounded by [`PROBE_TIMEOUT`] (the
//! pool's own acquire timeout is 5 s, far too long for a readiness answer). A probe that
//! only read would call a database that reads but cannot write healthy — a full disk, a
//! read-only standby, writes that hang or time out — while every call that matters fails.
//! What it found is the state `/readyz` answers from at once, and it flips the gRPC health
//! service (the chart's default readiness probe): a database that cannot be reached or
//! cannot write turns every LPS service NOT_SERVING within one interval plus one timeout,
//! and SERVING again on the first probe that writes. `lps_database_reachable` and
//! `lps_database_writable` follow it (the chart's `LpsDatabaseNotWritable` alert fires on
//! the second).
//!
//! An exhausted pool (every connection busy, the probe's acquire timed out) is load, not an
//! outage: `/readyz` says so with 503 as before, but gRPC health stays SERVING — every
//! replica shares the database, and taking them all out of rotation under load would turn
//! slowness into an outage.
//!
//! Shutdown wins: once [`Readiness::drain`] ran, nothing turns health back to SERVING
//! (the state and the health service change under one lock).

use std::{sync::Arc, time::Duration};

use sqlx::PgPool;
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::grpc;

/// How often the probe runs.
pub const PROBE_INTERVAL: Duration = Duration::from_millis(500);
/// The bound on one probe: acquiring a connection plus the heartbeat row's upsert.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// What the last probe found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DbState {
    /// The probe wrote its row.
    Reachable,
    /// Every connection of the pool was busy for the whole probe timeout.
    PoolExhausted,
    Unreachable,
    /// Connected, but the write failed or hung: the database cannot write.
    CannotWrite(crate::db::Fault),
}

impl DbState {
    /// Whether this state takes the replica out of rotation (gRPC health NOT_SERVING).
    fn serving(self) -> bool {
        matches!(self, Self::Reachable | Self::PoolExhausted)
    }
}

#[derive(Debug)]
struct Inner {
    db: DbState,
    draining: bool,
}

/// The replica's readiness; cheap to clone.
#[derive(Clone)]
pub struct Readiness {
    inner: Arc<Mutex<Inner>>,
    health: tonic_health::server::HealthReporter,
    /// `lps_database_reachable`.
    reachable: prometheus_client::metrics::gauge::Gauge,
    /// `lps_database_writable`.
    writable: prometheus_client::metrics::gauge::Gauge,
    /// This replica's id (its `write_probe` row).
    replica: Arc<str>,
}

impl std::fmt::Debug for Readiness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Readiness").finish_non_exhaustive()
    }
}

impl Readiness {
    /// Starts SERVING with the database reachable (start-up just used it).
    pub async fn new(
        health: tonic_health::server::HealthReporter,
        reachable: prometheus_client::metrics::gauge::Gauge,
        writable: prometheus_client::metrics::gauge::Gauge,
        replica: &str,
    ) -> Self {
        let r = Self {
            inner: Arc::new(Mutex::new(Inner {
                db: DbState::Reachable,
                draining: false,
            })),
            health,
            reachable,
            writable,
            replica: replica.into(),
        };
        r.reachable.set(1);
        r.writable.set(1);
        set_health(&r.health, true).await;
        r
    }

    /// `/readyz`'s answer: `None` when ready, else why not.
    pub async fn not_ready(&self) -> Option<String> {
        let inner = self.inner.lock().await;
        if inner.draining {
            return Some("shutting down".into());
        }
        match inner.db {
            DbState::Reachable => None,
            DbState::PoolExhausted => Some(
                "database pool exhausted (every connection busy; raise LPS_DB_MAX_CONNECTIONS)"
                    .into(),
            ),
            DbState::Unreachable => Some("database unreachable".into()),
            DbState::CannotWrite(fault) => {
                Some(format!("database cannot write: {}", fault.describe()))
            }
        }
    }

    /// Records a probe's finding; flips gRPC health when reachability changed.
    async fn record(&self, db: DbState) {
        let mut inner = self.inner.lock().await;
        if inner.db == db {
            return;
        }
        let was_serving = inner.db.serving();
        let serving = db.serving();
        match db {
            DbState::Reachable => info!("database reachable and writable again"),
            DbState::PoolExhausted => warn!("database pool exhausted: every connection busy"),
            DbState::Unreachable => warn!("database unreachable: health NOT_SERVING"),
            DbState::CannotWrite(fault) => warn!(
                fault = fault.label(),
                "database cannot write ({}): health NOT_SERVING",
                fault.describe()
            ),
        }
        inner.db = db;
        self.reachable.set(i64::from(db != DbState::Unreachable));
        // NB: an exhausted pool says nothing about writes; the last finding stands.
        match db {
            DbState::Reachable => {
                self.writable.set(1);
            }
            DbState::Unreachable | DbState::CannotWrite(_) => {
                self.writable.set(0);
            }
            DbState::PoolExhausted => {}
        }
        if was_serving != serving && !inner.draining {
            set_health(&self.health, serving).await;
        }
    }

    /// Shutdown started: NOT_SERVING from now on.
    pub async fn drain(&self) {
        let mut inner = self.inner.lock().await;
        inner.draining = true;
        set_health(&self.health, false).await;
    }

    /// Probes every [`PROBE_INTERVAL`] until cancelled.
    pub async fn run(self, pool: PgPool, cancel: CancellationToken) {
        let mut tick = tokio::time::interval(PROBE_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                _ = tick.tick() => {}
            }
            let found = probe(&pool, &self.replica).await;
            self.record(found).await;
        }
    }
}

/// One probe, bounded by [`PROBE_TIMEOUT`]: the heartbeat row's upsert on a pooled
/// connection.
async fn probe(pool: &PgPool, replica: &str) -> DbState {
    let connected = std::sync::atomic::AtomicBool::new(false);
    let write = async {
        let mut conn = pool.acquire().await?;
        connected.store(true, std::sync::atomic::Ordering::Relaxed);
        let mut tx = sqlx::Connection::begin(&mut *conn).await?;
        // NB: the server ends a write that hangs on a lock itself (57014), so a probe given
        // up on does not leave a backend waiting behind it, one per interval.
        sqlx::query("set local statement_timeout = 800")
            .execute(&mut *tx)
            .await?;
        sqlx::query_file!("src/readiness_probe.sql", replica)
            .execute(&mut *tx)
            .await?;
        tx.commit().await
    };
    let found = tokio::time::timeout(PROBE_TIMEOUT, write).await;
    let connected = connected.load(std::sync::atomic::Ordering::Relaxed);
    match found {
        Ok(Ok(_)) => DbState::Reachable,
        // NB: a pool at its size with no idle connection is busy, not cut off; a timeout
        // with room in the pool means opening a connection hung.
        Ok(Err(sqlx::Error::PoolTimedOut)) | Err(_) if !connected && exhausted(pool) => {
            DbState::PoolExhausted
        }
        // Connected, and the write hung: a database that cannot commit (a full WAL disk,
        // a synchronous standby that is gone).
        Err(_) if connected => DbState::CannotWrite(crate::db::Fault::Timeout),
        Ok(Err(e)) => match crate::db::fault(&e) {
            None | Some(crate::db::Fault::Unreachable) => DbState::Unreachable,
            Some(fault) => DbState::CannotWrite(fault),
        },
        Err(_) => DbState::Unreachable,
    }
}

fn exhausted(pool: &PgPool) -> bool {
    pool.size() >= pool.options().get_max_connections() && pool.num_idle() == 0
}

/// Flips every LPS service's gRPC health status.
async fn set_health(health: &tonic_health::server::HealthReporter, serving: bool) {
    use lps_proto::pb::{
        node_service_server::NodeServiceServer, ops_service_server::OpsServiceServer,
        schedule_service_server::ScheduleServiceServer, search_service_server::SearchServiceServer,
    };
    use tonic::server::NamedService;
    use tonic_health::ServingStatus::{NotServing, Serving};
    let status = if serving { Serving } else { NotServing };
    health.set_service_status("", status).await;
    health
        .set_service_status(
            <NodeServiceServer<grpc::node::NodeApi> as NamedService>::NAME,
            status,
        )
        .await;
    health
        .set_service_status(
            <SearchServiceServer<grpc::search::SearchApi> as NamedService>::NAME,
            status,
        )
        .await;
    health
        .set_service_status(
            <ScheduleServiceServer<grpc::schedule::ScheduleApi> as NamedService>::NAME,
            status,
        )
        .await;
    health
        .set_service_status(
            <OpsServiceServer<grpc::ops::OpsApi> as NamedService>::NAME,
            status,
        )
        .await;
}
