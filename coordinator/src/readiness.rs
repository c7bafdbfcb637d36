//! Readiness: whether this replica can serve, kept current by a background database probe.
//!
//! Every [`PROBE_INTERVAL`] the probe takes a pooled connection and runs `select 1`, the
//! two together bounded by [`PROBE_TIMEOUT`] (the pool's own acquire timeout is 5 s, far
//! too long for a readiness answer). What it found is the state `/readyz` answers from at
//! once, and it flips the gRPC health service (the chart's default readiness probe): a
//! database that cannot be reached turns every LPS service NOT_SERVING within one interval
//! plus one timeout, and SERVING again on the first probe that succeeds.
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
/// The bound on one probe: acquiring a connection plus `select 1`.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// What the last probe found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DbState {
    Reachable,
    /// Every connection of the pool was busy for the whole probe timeout.
    PoolExhausted,
    Unreachable,
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
    ) -> Self {
        let r = Self {
            inner: Arc::new(Mutex::new(Inner {
                db: DbState::Reachable,
                draining: false,
            })),
            health,
            reachable,
        };
        r.reachable.set(1);
        set_health(&r.health, true).await;
        r
    }

    /// `/readyz`'s answer: `None` when ready, else why not.
    pub async fn not_ready(&self) -> Option<&'static str> {
        let inner = self.inner.lock().await;
        if inner.draining {
            return Some("shutting down");
        }
        match inner.db {
            DbState::Reachable => None,
            DbState::PoolExhausted => Some(
                "database pool exhausted (every connection busy; raise LPS_DB_MAX_CONNECTIONS)",
            ),
            DbState::Unreachable => Some("database unreachable"),
        }
    }

    /// Records a probe's finding; flips gRPC health when reachability changed.
    async fn record(&self, db: DbState) {
        let mut inner = self.inner.lock().await;
        if inner.db == db {
            return;
        }
        let was_reachable = inner.db != DbState::Unreachable;
        let reachable = db != DbState::Unreachable;
        match db {
            DbState::Reachable => info!("database reachable again"),
            DbState::PoolExhausted => warn!("database pool exhausted: every connection busy"),
            DbState::Unreachable => warn!("database unreachable: health NOT_SERVING"),
        }
        inner.db = db;
        self.reachable.set(i64::from(reachable));
        if was_reachable != reachable && !inner.draining {
            set_health(&self.health, reachable).await;
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
            let found = probe(&pool).await;
            self.record(found).await;
        }
    }
}

/// One probe, bounded by [`PROBE_TIMEOUT`].
async fn probe(pool: &PgPool) -> DbState {
    let select = async {
        let mut conn = pool.acquire().await?;
        sqlx::query_scalar::<_, i32>("select 1")
            .fetch_one(&mut *conn)
            .await
    };
    match tokio::time::timeout(PROBE_TIMEOUT, select).await {
        Ok(Ok(_)) => DbState::Reachable,
        // NB: a pool at its size with no idle connection is busy, not cut off; a timeout
        // with room in the pool means opening a connection hung.
        Ok(Err(sqlx::Error::PoolTimedOut)) | Err(_) if exhausted(pool) => DbState::PoolExhausted,
        Ok(Err(_)) | Err(_) => DbState::Unreachable,
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
