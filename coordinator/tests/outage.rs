//! Database outages must not cost attempts (DESIGN §2 "Database outages"): real
//! coordinators and real nodes (the scripted executor) over a database that goes away —
//! every connection cut and new ones refused, or the job table locked — for longer than the
//! lease TTL while 80 jobs run. Whatever happens in between, every job ends `done` on its
//! first attempt with its own result, and no finished result is thrown away.

use std::{
    net::SocketAddr,
    sync::Arc,
    time::{Duration, Instant},
};

use clap::Parser as _;
use lps_coordinator::{
    app::{self, Running},
    config::Cli,
    queue::{EnqueueContext, MallLimits},
};
use lps_crawler_node::{
    config::Config as NodeConfig,
    executor::ScriptedExecutor,
    node::{Node, NodeError},
};
use lps_proto::model::{MallId, Priority, ProductSpec, SearchRequest};
use sqlx::{
    PgPool,
    postgres::{PgConnectOptions, PgPoolOptions},
};
use tokio::{
    io::copy_bidirectional,
    net::{TcpListener, TcpStream},
    sync::watch,
    task::JoinHandle,
};
use tokio_util::sync::CancellationToken;

mod common;

use common::{CLIENT_TOKEN, NODE_TOKEN};

const MALL: &str = "testmall-alpha";
const JOBS: usize = 80;

/// The coordinator's timings in a run.
struct Timings {
    heartbeat: &'static str,
    lease_ttl: &'static str,
    grace: &'static str,
    reap: &'static str,
    /// How long the database is away: longer than the lease TTL.
    outage: Duration,
    /// The jobs run `first_job_ms + (i % 16) * step_ms`.
    first_job_ms: usize,
    step_ms: usize,
}

/// Scaled for the suite: 5 heartbeats (1 s) + grace + a reaper pass, with room, against a
/// 20 s outage (longer than the lease, as in the field: 31 s against 30 s).
const SCALED: Timings = Timings {
    heartbeat: "200ms",
    lease_ttl: "15s",
    grace: "12s",
    reap: "100ms",
    outage: Duration::from_secs(20),
    first_job_ms: 3_000,
    step_ms: 2_000,
};

/// The defaults (5 s heartbeats, 45 s lease, 15 s grace, 1 s reaper) against the issue's
/// 60 s outage; jobs of 10 to 100 s, so some finish during it and some after.
const DEFAULTS: Timings = Timings {
    heartbeat: "5s",
    lease_ttl: "45s",
    grace: "15s",
    reap: "1s",
    outage: Duration::from_secs(60),
    first_job_ms: 10_000,
    step_ms: 6_000,
};

/// A TCP gate between the coordinator and PostgreSQL: `close` cuts every connection and
/// refuses new ones (what a stopped server looks like), `open` lets them through again.
struct DbGate {
    port: u16,
    open: watch::Sender<bool>,
}

impl DbGate {
    async fn spawn(upstream: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (open, watch) = watch::channel(true);
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                if !*watch.borrow() {
                    continue; // refused: dropped at once
                }
                let (upstream, mut watch) = (upstream.clone(), watch.clone());
                tokio::spawn(async move {
                    let Ok(mut server) = TcpStream::connect(&upstream).await else {
                        return;
                    };
                    tokio::select! {
                        _ = copy_bidirectional(&mut inbound, &mut server) => {}
                        _ = watch.wait_for(|open| !*open) => {}
                    }
                });
            }
        });
        Self { port, open }
    }

    fn close(&self) {
        self.open.send_replace(false);
    }

    fn open(&self) {
        self.open.send_replace(true);
    }
}

/// A coordinator whose pool goes through `gate` (as `db::connect` builds it: 5 s acquire
/// timeout).
async fn coordinator_via(gate: Option<&DbGate>, opts: &PgConnectOptions, t: &Timings) -> Running {
    let args = [
        "coordinator",
        "--database-url",
        "postgres://unused",
        "--grpc-addr",
        "127.0.0.1:0",
        "--http-addr",
        "127.0.0.1:0",
        "--client-tokens",
        CLIENT_TOKEN,
        "--node-tokens",
        NODE_TOKEN,
        "--heartbeat-interval",
        t.heartbeat,
        "--lease-ttl",
        t.lease_ttl,
        "--node-grace",
        t.grace,
        "--reap-interval",
        t.reap,
        "--claim-poll",
        "500ms",
        "--shutdown-timeout",
        "5s",
        "--malls",
        MALL,
    ];
    let config = Cli::try_parse_from(args).unwrap().serve.validate().unwrap();
    let opts = match gate {
        Some(gate) => opts.clone().host("127.0.0.1").port(gate.port),
        None => opts.clone(),
    };
    let pool = PgPoolOptions::new()
        .max_connections(10)
        .acquire_timeout(Duration::from_secs(5))
        .connect_with(opts)
        .await
        .unwrap();
    let running = app::start_with_pool(config, pool).await.unwrap();
    running
        .queue
        .upsert_mall(&MallLimits::unlimited(MallId::new(MALL).unwrap()))
        .await
        .unwrap();
    running
}

struct TestNode {
    stop: CancellationToken,
    task: JoinHandle<Result<(), NodeError>>,
}

fn start_node(addr: SocketAddr, id: &str, slots: u32) -> TestNode {
    let mut config = NodeConfig::new(format!("http://{addr}"), NODE_TOKEN);
    config.node_id = id.into();
    config.slots = slots;
    config.drain_timeout = Duration::from_secs(10);
    config.reconnect_deadline = Duration::from_secs(120);
    let node = Node::new(config, ScriptedExecutor::new());
    let stop = CancellationToken::new();
    let task = tokio::spawn(node.run(stop.clone()));
    TestNode { stop, task }
}

/// `JOBS` jobs of the run's lengths: some finish while the database is away (their results
/// wait on the node), the rest after it is back. Each has its own price.
async fn enqueue(running: &Running, t: &Timings) -> Vec<i64> {
    let items = (0..JOBS)
        .map(|i| {
            let name = format!(
                "sleep:{} ok:{}",
                t.first_job_ms + (i % 16) * t.step_ms,
                1_000 + i
            );
            ProductSpec::new(None, &name).unwrap()
        })
        .collect();
    let req = SearchRequest::new(
        items,
        vec![MallId::new(MALL).unwrap()],
        Priority::INTERACTIVE,
        None,
        None,
    )
    .unwrap();
    let accepted = running
        .queue
        .enqueue(&req, &EnqueueContext::default())
        .await
        .unwrap();
    accepted.items.iter().map(|i| i.job_id).collect()
}

async fn scalar(pool: &PgPool, sql: &str) -> i64 {
    sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(sql.to_owned()))
        .fetch_one(pool)
        .await
        .unwrap()
}

async fn wait_for(pool: &PgPool, sql: &str, want: i64, within: Duration) -> i64 {
    let deadline = Instant::now() + within;
    loop {
        let n = scalar(pool, sql).await;
        if n == want || Instant::now() > deadline {
            return n;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Every job ended `done` on its first lease with its own price; nothing was charged,
/// reclaimed or thrown away as stale.
async fn assert_nothing_charged(pool: &PgPool, what: &str) {
    let done = wait_for(
        pool,
        "select count(*) from job where state = 'done'",
        JOBS as i64,
        Duration::from_secs(180),
    )
    .await;
    let log: Vec<(i64, i64, String, Option<String>)> = sqlx::query_as(
        "select job_id, lease_epoch, ended::text, error_class::text from job_attempt
         where ended <> 'done' order by job_id, lease_epoch",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    assert_eq!(
        done, JOBS as i64,
        "{what}: not every job finished; attempts {log:?}"
    );
    assert!(
        log.is_empty(),
        "{what}: attempts that did not end done: {log:?}"
    );
    for (sql, label) in [
        (
            "select coalesce(sum(attempts), 0)::bigint from job",
            "attempts charged",
        ),
        (
            "select coalesce(sum(reclaims), 0)::bigint from job",
            "reclaims",
        ),
        (
            "select count(*) from job where lease_epoch <> 1",
            "jobs leased twice",
        ),
        (
            "select count(*) from stale_report",
            "finished results discarded as stale",
        ),
    ] {
        assert_eq!(scalar(pool, sql).await, 0, "{what}: {label}");
    }
    let wrong_price = scalar(
        pool,
        "select count(*) from job j join offer o using (job_id)
         where o.price <> substring(j.product_name from 'ok:([0-9]+)')::bigint",
    )
    .await;
    assert_eq!(wrong_price, 0, "{what}: a job holds another job's price");
    assert_eq!(
        scalar(pool, "select count(*) from offer").await,
        JOBS as i64
    );
}

async fn all_running(pool: &PgPool) {
    let running = wait_for(
        pool,
        "select count(*) from job where state = 'running'",
        JOBS as i64,
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(running, JOBS as i64, "the jobs did not all start");
}

/// The database stops answering for `t.outage` while 80 jobs run on two nodes.
async fn outage(opts: PgConnectOptions, t: &Timings) {
    let pool = PgPoolOptions::new()
        .max_connections(4)
        .connect_with(opts.clone())
        .await
        .unwrap();
    let gate = Arc::new(DbGate::spawn(format!("{}:{}", opts.get_host(), opts.get_port())).await);
    let c = coordinator_via(Some(&gate), &opts, t).await;
    let nodes = [
        start_node(c.grpc_addr, "node-1", 40),
        start_node(c.grpc_addr, "node-2", 40),
    ];
    enqueue(&c, t).await;
    all_running(&pool).await;

    let started = Instant::now();
    gate.close();
    tokio::time::sleep(t.outage).await;
    assert!(
        scalar(
            &pool,
            "select count(*) from job where state = 'running' and lease_until < now()"
        )
        .await
            > 0,
        "the outage did not outlast the leases: the test proves nothing"
    );
    gate.open();

    assert_nothing_charged(&pool, &format!("after a {:?} outage", t.outage)).await;
    eprintln!(
        "outage {:?}: {JOBS} jobs done {:?} after it began, 0 attempts charged, 0 reclaims, 0 stale",
        t.outage,
        started.elapsed()
    );
    for n in nodes {
        n.stop.cancel();
        n.task.await.unwrap().unwrap();
    }
    c.shutdown().await;
}

#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn a_database_outage_longer_than_the_lease_ttl_charges_no_attempt(
    _: PgPoolOptions,
    opts: PgConnectOptions,
) {
    outage(opts, &SCALED).await;
}

/// The target at the default timings (about 3 minutes, so not in the suite):
/// `cargo test -p lps-coordinator --test outage -- --ignored --nocapture`.
#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
#[ignore = "3 minutes at the default timings; run by hand (BENCHMARKS.md)"]
async fn a_60_s_outage_at_the_default_timings_charges_no_attempt(
    _: PgPoolOptions,
    opts: PgConnectOptions,
) {
    outage(opts, &DEFAULTS).await;
}

#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn a_job_table_locked_longer_than_the_lease_ttl_charges_no_attempt(
    _: PgPoolOptions,
    opts: PgConnectOptions,
) {
    let pool = PgPoolOptions::new()
        .max_connections(4)
        .connect_with(opts.clone())
        .await
        .unwrap();
    let c = coordinator_via(None, &opts, &SCALED).await;
    let nodes = [
        start_node(c.grpc_addr, "node-1", 40),
        start_node(c.grpc_addr, "node-2", 40),
    ];
    enqueue(&c, &SCALED).await;
    all_running(&pool).await;

    let mut lock = pool.begin().await.unwrap();
    sqlx::query("lock table job in access exclusive mode")
        .execute(&mut *lock)
        .await
        .unwrap();
    tokio::time::sleep(SCALED.outage).await;
    lock.commit().await.unwrap();

    assert_nothing_charged(&pool, "after a 20 s table lock").await;
    for n in nodes {
        n.stop.cancel();
        n.task.await.unwrap().unwrap();
    }
    c.shutdown().await;
}

/// While the database is away a Search is UNAVAILABLE with a RetryInfo (when to try again),
/// and goes through once it is back.
#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn a_search_during_an_outage_is_unavailable_with_retry_info(
    _: PgPoolOptions,
    opts: PgConnectOptions,
) {
    use lps_proto::pb::{self, search_service_client::SearchServiceClient};
    use tonic_types::StatusExt as _;
    let gate = DbGate::spawn(format!("{}:{}", opts.get_host(), opts.get_port())).await;
    let c = coordinator_via(Some(&gate), &opts, &SCALED).await;
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", c.grpc_addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut client = SearchServiceClient::new(channel);
    let search = || {
        common::with_token(
            pb::SearchRequest {
                products: vec![pb::Product {
                    code: String::new(),
                    name: "제주 삼다수 2L x 12".into(),
                    ..Default::default()
                }],
                malls: vec![MALL.into()],
                ..Default::default()
            },
            CLIENT_TOKEN,
        )
    };
    gate.close();
    let status = client.search(search()).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    let retry = status.get_error_details().retry_info().cloned();
    assert!(
        retry.is_some_and(|r| r.retry_delay.is_some_and(|d| !d.is_zero())),
        "{status:?}"
    );
    gate.open();
    client.search(search()).await.unwrap();
    c.shutdown().await;
}
