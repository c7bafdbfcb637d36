//! The coordinator as a supervised task set with ordered, bounded shutdown.
//!
//! [`start`] binds the listeners (port 0 works, for tests), migrates, and spawns: the gRPC
//! server and the HTTP health server (TLS when configured, see [`crate::tls`]), the job
//! listener, the control listener, the reaper, the alert loop, the delivery worker
//! ([`crate::delivery::worker`]), the scheduler ([`crate::schedule::scheduler`]), the
//! profile watcher ([`crate::profiles::watch`]) and the database probe that keeps gRPC health and
//! `/readyz` current ([`crate::readiness`]).
//! A background task that exits on its own is fatal: [`Running::wait`] returns its error.
//!
//! Shutdown ([`Running::shutdown`]), all under `shutdown_timeout`: health flips to
//! NOT_SERVING; new node streams are refused and every connected node is told to reconnect
//! (UNAVAILABLE: it keeps its running jobs and re-attaches them to another replica, or to
//! this one restarted — a rolling update does not restart the fleet); the gRPC and HTTP
//! servers stop; the background loops stop; the pool closes.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use anyhow::Context as _;
use axum::{Router, extract::State, http::StatusCode, routing::get};
use lps_proto::pb;
use sqlx::PgPool;
use tokio::{net::TcpListener, task::JoinSet};
use tokio_stream::wrappers::TcpListenerStream;
use tokio_util::{sync::CancellationToken, task::TaskTracker};
use tracing::{Instrument as _, error, info, info_span, warn};

use crate::{
    alerts,
    config::Config,
    db,
    dispatch::{self, DispatchConfig, Dispatcher, Registry},
    grpc,
    ledger::Ledger,
    metrics::Metrics,
    ops::Ops,
    profiles,
    queue::{CurrentJudge, JobListener, Queue, QueueConfig},
    readiness::Readiness,
    reaper,
    search::Searches,
    tls,
};

/// A started coordinator.
#[derive(Debug)]
pub struct Running {
    pub grpc_addr: SocketAddr,
    pub http_addr: SocketAddr,
    pub queue: Queue,
    /// Starts the node drain phase.
    shutdown: CancellationToken,
    /// Stops the servers and background loops.
    loops: CancellationToken,
    dispatcher: Dispatcher,
    tasks: JoinSet<(&'static str, anyhow::Result<()>)>,
    readiness: Readiness,
    timeout: Duration,
}

/// Starts every part of the coordinator.
pub async fn start(config: Config) -> anyhow::Result<Running> {
    let pool = db::connect(&config.database_url, config.db_max_connections)
        .await
        .context("connecting to PostgreSQL (DATABASE_URL)")?;
    db::migrate(&pool).await.context("applying migrations")?;
    start_with_pool(config, pool).await
}

/// [`start`] on an existing (migrated) pool.
pub async fn start_with_pool(config: Config, pool: PgPool) -> anyhow::Result<Running> {
    let shutdown = CancellationToken::new();
    let loops = CancellationToken::new();
    let queue = Queue::new(
        pool.clone(),
        QueueConfig {
            lease_ttl: config.lease_ttl,
            run_timeout: config.job_deadline,
            max_attempts: config.max_attempts,
            backoff_base: config.backoff_base,
            backoff_cap: config.backoff_cap,
            negative_ttl_no_results: config.negative_ttl_no_results,
            negative_ttl_judged: config.negative_ttl_judged,
            spend_cap_hourly_usd: config.spend_cap_hourly_usd,
            proxy_usd_per_gb: config.proxy_usd_per_gb,
            ..QueueConfig::default()
        },
    );
    let tokens = Arc::new(config.tokens.clone());
    let (profiles, profile_revision) =
        profiles::load_with_revision(config.profiles_dir.as_deref())?;
    for mall in &config.malls {
        if !profiles.iter().any(|p| p.wire.id == mall.as_str()) {
            anyhow::bail!("invalid setting LPS_MALLS: no site profile for mall {mall:?}");
        }
    }
    // NB: checked before any mall is registered: a vocabulary a node could not use stops
    // start-up here, naming the file and the entry (or the profile whose additions it is).
    let vocabulary = profiles::vocabulary(config.vocabulary_file.as_deref(), &profiles)?;
    // NB: before any clone of the queue: every part answers from the negative cache only
    // with entries judged by the words this coordinator sends its nodes.
    let queue = queue.judging_with(CurrentJudge::new(
        &vocabulary,
        profiles
            .iter()
            .filter_map(|p| Some((p.wire.id.as_str(), p.wire.vocabulary.as_ref()?))),
    ));
    let settings = SettingsWrite::begin(&pool, &config).await?;
    if settings.allowed {
        for profile in &profiles {
            let enabled = config.malls.contains(&profile.mall());
            queue
                .upsert_mall(&profiles::limits(profile, enabled))
                .await
                .with_context(|| format!("registering mall {}", profile.wire.id))?;
        }
    }
    info!(
        profiles = profiles.len(),
        profiles.revision = %profile_revision,
        enabled = ?config.malls.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "site profiles loaded"
    );
    info!(
        vocabulary = %config
            .vocabulary_file
            .as_deref()
            .map_or_else(|| "built-in".to_owned(), |p| p.display().to_string()),
        aliases = vocabulary.aliases.len(),
        variant_kinds = vocabulary.variants.len(),
        units = vocabulary.units.len(),
        "vocabulary loaded"
    );
    let mut tasks = JoinSet::new();

    let (wakeups, delivery_wakeups, listener_task) =
        JobListener::spawn_with_deliveries(&pool, loops.clone()).await?;
    tasks.spawn(async move {
        (
            "job listener",
            listener_task.await.map_err(anyhow::Error::from),
        )
    });

    let ledger = match &config.ledger {
        Some(ledger_config) => {
            let ledger_config = ledger_config.clone().with_profile_budgets(
                profiles
                    .iter()
                    .map(|p| (p.mall(), p.wire.ip_request_budget)),
            );
            let ledger = Ledger::new(pool.clone(), ledger_config);
            if settings.allowed {
                let r = ledger
                    .reconcile()
                    .await
                    .context("reconciling the proxy ports (LPS_PROXY_PORTS)")?;
                info!(
                    added = r.added,
                    enabled = r.enabled,
                    disabled = r.disabled,
                    "proxy ports reconciled"
                );
            }
            Some(ledger)
        }
        None => {
            warn!("no proxy gateway configured (LPS_PROXY_GATEWAY_HOST): nodes get no proxy ports");
            None
        }
    };
    let settings_allowed = settings.allowed;
    settings.commit().await?;
    // Streams an earlier process under this replica's id held died with it (a crash leaves
    // them marked connected).
    let stale = crate::node_session::disconnect_replica(&pool, &config.coordinator_id)
        .await
        .context("marking an earlier process's node streams disconnected")?;
    if stale > 0 {
        info!(
            streams = stale,
            "marked node streams of an earlier process under this id disconnected"
        );
    }
    let metrics = Arc::new(Metrics::new());
    metrics.init_malls(config.malls.iter().map(|m| m.as_str()));
    profiles::watch::record_loaded(&pool, &config.coordinator_id, &profile_revision)
        .await
        .context("recording the loaded site profiles")?;
    if let Err(e) = profiles::watch::forget_gone_replicas(&pool).await {
        warn!(error = %e, "could not delete the profile sets of replicas gone");
    }
    let (current_profiles, profile_updates) = tokio::sync::watch::channel(Arc::new(
        profiles::watch::ProfileSet::new(profile_revision, &profiles),
    ));
    {
        let watcher = profiles::watch::Watcher::new(
            config.profiles_dir.clone(),
            config.profiles_poll,
            queue.clone(),
            config.coordinator_id.clone(),
            config.malls.clone(),
            settings_allowed,
            metrics.clone(),
            current_profiles,
            &profiles,
        );
        let cancel = loops.clone();
        tasks.spawn(
            async move {
                watcher.run(cancel).await;
                ("profile watcher", Ok(()))
            }
            .instrument(info_span!(parent: None, "profiles.watch", log_only = true)),
        );
    }
    let registry = Registry::spawn();
    let dispatcher = Dispatcher {
        queue: queue.clone(),
        config: Arc::new(DispatchConfig {
            coordinator_id: config.coordinator_id.clone(),
            heartbeat_interval: config.heartbeat_interval,
            silence_timeout: dispatch::stream::silence_for(config.heartbeat_interval),
            node_grace: config.node_grace,
            quarantine: config.node_quarantine,
            claim_poll: config.claim_poll,
            profiles: profile_updates,
            vocabulary,
            limits: pb::Limits {
                max_ip_burns_per_job: config
                    .ledger
                    .as_ref()
                    .map_or(crate::ledger::DEFAULT_MAX_IP_BURNS_PER_JOB, |l| {
                        l.max_ip_burns_per_job
                    }),
                ip_request_budget: config
                    .ledger
                    .as_ref()
                    .map_or(crate::ledger::DEFAULT_IP_REQUEST_BUDGET, |l| {
                        l.request_budget
                    }),
                proxy_usd_per_gb: config.proxy_usd_per_gb,
                ip_session_window: Some(lps_proto::model::duration_to_pb(IP_SESSION_WINDOW)),
            },
        }),
        registry: registry.clone(),
        wakeups,
        shutdown: shutdown.clone(),
        hard_stop: CancellationToken::new(),
        metrics: metrics.clone(),
        ledger: ledger.clone(),
        streams: TaskTracker::new(),
    };

    {
        let (pool, registry, cancel) = (pool.clone(), registry.clone(), loops.clone());
        tasks.spawn(
            async move {
                let r = dispatch::run_control_listener(pool, registry, cancel).await;
                ("control listener", r.map_err(anyhow::Error::from))
            }
            .instrument(info_span!(parent: None, "dispatch.control", log_only = true)),
        );
    }
    {
        let (queue, cancel, every) = (queue.clone(), loops.clone(), config.reap_interval);
        tasks.spawn(
            async move {
                reaper::run(queue, every, cancel).await;
                ("reaper", Ok(()))
            }
            .instrument(info_span!(parent: None, "reaper", log_only = true)),
        );
    }

    {
        let (pool, ops, metrics, alerts, cancel) = (
            pool.clone(),
            Ops::new(queue.clone()),
            metrics.clone(),
            config.alerts.clone(),
            loops.clone(),
        );
        tasks.spawn(
            async move {
                alerts::run(pool, ops, metrics, alerts, cancel).await;
                ("alerts", Ok(()))
            }
            .instrument(info_span!(parent: None, "alerts", log_only = true)),
        );
    }

    {
        let (pool, retention, metrics, cancel) = (
            pool.clone(),
            config.retention.clone(),
            metrics.clone(),
            loops.clone(),
        );
        tasks.spawn(
            async move {
                crate::retention::run(pool, retention, metrics, cancel).await;
                ("retention", Ok(()))
            }
            .instrument(info_span!(parent: None, "retention", log_only = true)),
        );
    }

    {
        let worker = crate::delivery::worker::Worker::new(
            Searches::new(queue.clone()),
            config.delivery.clone(),
            metrics.clone(),
            &config.coordinator_id,
        )
        .context("building the delivery worker's HTTP client")?
        .with_wakeups(delivery_wakeups);
        let cancel = loops.clone();
        tasks.spawn(
            async move {
                worker.run(cancel).await;
                ("delivery worker", Ok(()))
            }
            .instrument(info_span!(parent: None, "delivery.worker", log_only = true)),
        );
    }

    {
        let scheduler = crate::schedule::Scheduler::new(
            crate::schedule::Schedules::new(queue.clone()),
            config.schedule.clone(),
            metrics.clone(),
            &config.coordinator_id,
        );
        let cancel = loops.clone();
        tasks.spawn(
            async move {
                scheduler.run(cancel).await;
                ("scheduler", Ok(()))
            }
            .instrument(info_span!(parent: None, "schedule.scheduler", log_only = true)),
        );
    }

    // gRPC: services, health and reflection.
    let (health, health_service) = tonic_health::server::health_reporter();
    let readiness = Readiness::new(
        health,
        metrics.database_reachable.clone(),
        metrics.database_writable.clone(),
        &config.coordinator_id,
    )
    .await;
    {
        let (readiness, pool, cancel) = (readiness.clone(), pool.clone(), loops.clone());
        tasks.spawn(
            async move {
                readiness.run(pool, cancel).await;
                ("database probe", Ok(()))
            }
            .instrument(info_span!("readiness")),
        );
    }
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(lps_proto::FILE_DESCRIPTOR_SET)
        .build_v1()
        .context("building gRPC reflection")?;
    // NB: grpcurl and the official Python reflection client still speak only v1alpha.
    let reflection_v1alpha = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(lps_proto::FILE_DESCRIPTOR_SET)
        .build_v1alpha()
        .context("building gRPC reflection (v1alpha)")?;
    let grpc_listener = TcpListener::bind(config.grpc_addr)
        .await
        .with_context(|| format!("binding LPS_GRPC_ADDR {}", config.grpc_addr))?;
    let grpc_addr = grpc_listener.local_addr()?;
    let node_api = grpc::node::NodeApi::new(dispatcher.clone(), tokens.clone())
        .require_client_cert(
            config
                .tls
                .as_ref()
                .is_some_and(|t| t.requires_client_cert()),
        );
    let search_limits = grpc::limits::ClientLimits::new(config.client_limits.clone());
    let search_api = grpc::search::SearchApi::new(queue.clone(), tokens.clone())
        .with_limits(search_limits.clone())
        .with_shutdown(shutdown.clone())
        .with_destinations(config.delivery.destinations.clone());
    let ops_api = grpc::ops::OpsApi::new(queue.clone(), tokens.clone())
        .with_ledger(ledger.clone())
        .with_limits(search_limits);
    let schedule_api = grpc::schedule::ScheduleApi::new(
        crate::schedule::Schedules::new(queue.clone()),
        tokens.clone(),
        config.schedule.min_interval,
    )
    .with_limits(grpc::limits::ClientLimits::new(
        config.client_limits.clone(),
    ))
    .with_destinations(config.delivery.destinations.clone());
    let decoding = grpc::admission::max_decoding_bytes;
    let small = lps_proto::model::budget::SMALL_REQUEST_MAX_BYTES;
    let mut server = tonic::transport::Server::builder();
    if let Some(tls) = &config.tls {
        tls::install_crypto_provider();
        server = server
            .tls_config(tls.grpc())
            .context("configuring TLS on the gRPC port (LPS_TLS_CERT)")?;
    }
    let router = server
        .http2_keepalive_interval(Some(Duration::from_secs(20)))
        // NB: a deadline that passes on the server is DEADLINE_EXCEEDED, not tonic's CANCELLED.
        .layer(grpc::observe::ObserveLayer {
            metrics: metrics.clone(),
        })
        .layer(grpc::deadline::DeadlineLayer)
        // NB: innermost, so refused calls are counted and held to their deadline too; it
        // checks the token and the request's budget before tonic decodes a byte of it.
        .layer(grpc::admission::AdmissionLayer {
            tokens: tokens.clone(),
        })
        .add_service(health_service.max_decoding_message_size(small))
        .add_service(reflection.max_decoding_message_size(small))
        .add_service(reflection_v1alpha.max_decoding_message_size(small))
        .add_service(
            search_api
                .into_service()
                .max_decoding_message_size(decoding(pb::search_service_server::SERVICE_NAME)),
        )
        .add_service(
            ops_api
                .into_service()
                .max_decoding_message_size(decoding(pb::ops_service_server::SERVICE_NAME)),
        )
        .add_service(
            schedule_api
                .into_service()
                .max_decoding_message_size(decoding(pb::schedule_service_server::SERVICE_NAME)),
        )
        .add_service(
            pb::node_service_server::NodeServiceServer::new(node_api)
                .max_decoding_message_size(decoding(pb::node_service_server::SERVICE_NAME)),
        );
    let grpc_stop = loops.clone();
    tasks.spawn(
        async move {
            let r = router
                .serve_with_incoming_shutdown(
                    TcpListenerStream::new(grpc_listener),
                    grpc_stop.cancelled_owned(),
                )
                .await;
            ("grpc server", r.map_err(anyhow::Error::from))
        }
        .instrument(info_span!(parent: None, "grpc.server", log_only = true)),
    );

    // HTTP: liveness and readiness.
    let http_listener = TcpListener::bind(config.http_addr)
        .await
        .with_context(|| format!("binding LPS_HTTP_ADDR {}", config.http_addr))?;
    let http_addr = http_listener.local_addr()?;
    let app = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .route("/ops", get(ops_json))
        .with_state(HttpState {
            pool: pool.clone(),
            readiness: readiness.clone(),
            metrics: metrics.clone(),
            ops: Ops::new(queue.clone()),
        });
    let http_stop = loops.clone();
    let http_tls = match (&config.tls, config.http_tls) {
        (Some(tls), true) => Some(tls.http().context("configuring TLS on the HTTP port")?),
        _ => None,
    };
    tasks.spawn(
        async move {
            let r = match http_tls {
                Some(acceptor) => {
                    axum::serve(tls::HttpTlsListener::new(http_listener, acceptor), app)
                        .with_graceful_shutdown(http_stop.cancelled_owned())
                        .await
                }
                None => {
                    axum::serve(http_listener, app)
                        .with_graceful_shutdown(http_stop.cancelled_owned())
                        .await
                }
            };
            ("http server", r.map_err(anyhow::Error::from))
        }
        .instrument(info_span!(parent: None, "http.server", log_only = true)),
    );

    info!(
        %grpc_addr,
        %http_addr,
        grpc.tls = config.tls.is_some(),
        grpc.mtls = config.tls.as_ref().is_some_and(|t| t.requires_client_cert()),
        http.tls = config.http_tls,
        coordinator.id = %config.coordinator_id,
        "coordinator started"
    );
    Ok(Running {
        grpc_addr,
        http_addr,
        queue,
        shutdown,
        loops,
        dispatcher,
        tasks,
        readiness,
        timeout: config.shutdown_timeout,
    })
}

#[derive(Debug, Clone)]
struct HttpState {
    pool: PgPool,
    readiness: Readiness,
    metrics: Arc<Metrics>,
    ops: Ops,
}

/// OpenMetrics when the scraper asks for it, else the Prometheus text format 0.0.4.
async fn metrics_text(
    State(s): State<HttpState>,
    headers: axum::http::HeaderMap,
) -> impl axum::response::IntoResponse {
    let accept = headers
        .get(axum::http::header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    let format = lps_telemetry::exposition::Format::negotiate(accept);
    s.metrics.observe_pool(&s.pool);
    (
        [(axum::http::header::CONTENT_TYPE, format.content_type())],
        s.metrics.encode_as(format),
    )
}

async fn ops_json(State(s): State<HttpState>) -> axum::response::Response {
    use axum::response::IntoResponse as _;
    match s.ops.snapshot().await {
        Ok(ops) => axum::Json(ops).into_response(),
        Err(e) => {
            warn!(error = %e, "ops snapshot failed");
            (StatusCode::SERVICE_UNAVAILABLE, "ops snapshot unavailable").into_response()
        }
    }
}

/// Answers from the database probe's last finding (no query here: a cut-off database would
/// otherwise hold the answer for the pool's acquire timeout).
async fn readyz(State(s): State<HttpState>) -> (StatusCode, String) {
    match s.readiness.not_ready().await {
        None => (StatusCode::OK, "ready".into()),
        Some(why) => (StatusCode::SERVICE_UNAVAILABLE, why),
    }
}

impl Running {
    /// Waits until a background task ends (which only happens on failure) and returns why.
    pub async fn wait(&mut self) -> anyhow::Error {
        match self.tasks.join_next().await {
            Some(Ok((name, Ok(())))) => anyhow::anyhow!("{name} stopped unexpectedly"),
            Some(Ok((name, Err(e)))) => e.context(format!("{name} failed")),
            Some(Err(e)) => anyhow::Error::from(e).context("a background task panicked"),
            None => anyhow::anyhow!("no background task is running"),
        }
    }

    /// Ordered, bounded shutdown (see the module doc).
    pub async fn shutdown(mut self) {
        let deadline = tokio::time::Instant::now() + self.timeout;
        self.readiness.drain().await;
        info!("shutting down: telling nodes to reconnect");
        self.shutdown.cancel();
        self.dispatcher.streams.close();
        if tokio::time::timeout_at(deadline, self.dispatcher.streams.wait())
            .await
            .is_err()
        {
            warn!("node streams did not end before the shutdown deadline; ending them");
            self.dispatcher.hard_stop.cancel();
            let _ =
                tokio::time::timeout(Duration::from_secs(2), self.dispatcher.streams.wait()).await;
        }
        self.stop_loops(deadline).await;
        self.queue.pool().close().await;
        info!("coordinator stopped");
    }

    /// Ends at once without draining nodes (tests simulating a crash use this).
    pub async fn abort(mut self) {
        self.dispatcher.hard_stop.cancel();
        self.shutdown.cancel();
        self.loops.cancel();
        self.tasks.abort_all();
        while self.tasks.join_next().await.is_some() {}
        self.dispatcher.streams.close();
        let _ = tokio::time::timeout(Duration::from_secs(2), self.dispatcher.streams.wait()).await;
    }

    async fn stop_loops(&mut self, deadline: tokio::time::Instant) {
        self.loops.cancel();
        while let Ok(Some(r)) = tokio::time::timeout_at(deadline, self.tasks.join_next()).await {
            if let Ok((name, Err(e))) = r {
                error!(task = name, error = %e, "task failed during shutdown");
            }
        }
        self.tasks.abort_all();
    }
}

/// Key of the transaction advisory lock under which a starting replica checks the
/// configuration revision and writes the shared settings.
/// How long a node may keep one sticky IP session (`Limits.ip_session_window`, sent in
/// Welcome): it then rotates to another exit IP even within its request budget.
const IP_SESSION_WINDOW: Duration = Duration::from_secs(600);

const SETTINGS_LOCK: i64 = 0x4c50_535f_5345_5453; // "LPS_SETS"

/// The start-up write of the settings every replica shares (mall rows, proxy ports): held
/// under [`SETTINGS_LOCK`] until [`SettingsWrite::commit`], so replicas starting together
/// take turns, and `allowed` only when no replica of a newer `LPS_CONFIG_REVISION` wrote
/// them before (an old replica restarting in a rolling update must not undo them).
struct SettingsWrite {
    tx: sqlx::Transaction<'static, sqlx::Postgres>,
    allowed: bool,
}

impl SettingsWrite {
    async fn begin(pool: &PgPool, config: &Config) -> anyhow::Result<Self> {
        let mut tx = pool.begin().await.context("starting the settings write")?;
        sqlx::query!("select pg_advisory_xact_lock($1)", SETTINGS_LOCK)
            .execute(&mut *tx)
            .await
            .context("waiting for other replicas' settings writes")?;
        let revision = i64::from(config.config_revision);
        let newer = sqlx::query_scalar!(
            "insert into config_revision (scope, revision, coordinator_id)
             values ('settings', $1, $2)
             on conflict (scope) do update
                 set revision = excluded.revision, coordinator_id = excluded.coordinator_id,
                     applied_at = now()
                 where config_revision.revision <= excluded.revision
             returning revision",
            revision,
            config.coordinator_id
        )
        .fetch_optional(&mut *tx)
        .await
        .context("reading the configuration revision")?
        .is_none();
        if newer {
            let stored = sqlx::query_scalar!(
                "select revision from config_revision where scope = 'settings'"
            )
            .fetch_one(&mut *tx)
            .await?;
            warn!(
                revision,
                stored,
                "a replica of a newer LPS_CONFIG_REVISION wrote the mall and proxy settings; this replica keeps theirs and writes none of its own"
            );
        }
        Ok(Self {
            tx,
            allowed: !newer,
        })
    }

    async fn commit(self) -> anyhow::Result<()> {
        self.tx
            .commit()
            .await
            .context("committing the settings write")
    }
}
