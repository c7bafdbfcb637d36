//! The node stream end to end: real coordinators (127.0.0.1, real PostgreSQL) and real
//! crawler nodes (`lps_crawler_node::Node`, in process) running the scripted executor.
//! Every count is read from the database.

use std::{net::SocketAddr, time::Duration};

use lps_coordinator::{app::Running, queue::EnqueueContext, search::Searches};
use lps_crawler_node::{
    config::Config as NodeConfig,
    executor::ScriptedExecutor,
    node::{Node, NodeError, NodeHandle},
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

use common::NODE_TOKEN;

const MALL: &str = "testmall-alpha";

async fn coordinator_at(pool: &PgPool, grpc: &str, grace: &str) -> Running {
    // NB: the shortest lease the grace allows (see LPS_LEASE_TTL), plus a second.
    let ttl = humantime::parse_duration(grace).unwrap() + Duration::from_secs(3);
    let ttl = format!("{}ms", ttl.as_millis());
    let flags = [
        "--grpc-addr",
        grpc,
        "--heartbeat-interval",
        "200ms",
        "--lease-ttl",
        &ttl,
        "--node-grace",
        grace,
        "--claim-poll",
        "500ms",
        "--shutdown-timeout",
        "5s",
        "--malls",
        MALL,
    ];
    common::start_with_mall(pool, MALL, &flags).await
}

/// A stand-in for the Service in front of the coordinator replicas: new connections go to
/// the current target.
struct Balancer {
    addr: SocketAddr,
    target: watch::Sender<SocketAddr>,
}

impl Balancer {
    async fn spawn(first: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (target, watch) = watch::channel(first);
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let to = *watch.borrow();
                tokio::spawn(async move {
                    if let Ok(mut server) = TcpStream::connect(to).await {
                        let _ = copy_bidirectional(&mut inbound, &mut server).await;
                    }
                });
            }
        });
        Self { addr, target }
    }
}

async fn coordinator(pool: &PgPool, grace: &str) -> Running {
    coordinator_at(pool, "127.0.0.1:0", grace).await
}

struct TestNode {
    handle: NodeHandle,
    stop: CancellationToken,
    task: JoinHandle<Result<(), NodeError>>,
}

fn start_node(addr: SocketAddr, id: &str, slots: u32, token: &str) -> TestNode {
    let mut config = NodeConfig::new(format!("http://{addr}"), token);
    config.node_id = id.into();
    config.slots = slots;
    config.drain_timeout = Duration::from_secs(5);
    config.reconnect_deadline = Duration::from_secs(30);
    let node = Node::new(config, ScriptedExecutor::new());
    let handle = node.handle();
    let stop = CancellationToken::new();
    let task = tokio::spawn(node.run(stop.clone()));
    TestNode { handle, stop, task }
}

async fn enqueue(running: &Running, names: &[String]) -> Vec<i64> {
    let mut ids = Vec::new();
    for chunk in names.chunks(200) {
        let req = SearchRequest::new(
            chunk
                .iter()
                .map(|n| ProductSpec::new(None, n).unwrap())
                .collect(),
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
        ids.extend(accepted.items.iter().map(|i| i.job_id));
    }
    ids
}

async fn scalar(pool: &PgPool, sql: &str) -> i64 {
    sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(sql.to_owned()))
        .fetch_one(pool)
        .await
        .unwrap()
}

async fn wait_for_count(pool: &PgPool, sql: &str, want: i64, within: Duration) -> i64 {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let n = scalar(pool, sql).await;
        if n == want || tokio::time::Instant::now() > deadline {
            return n;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Every attempt of every job that ran more than once, one line each (for failure messages).
async fn attempt_log(pool: &PgPool) -> String {
    // job, epoch, node, how it ended, error class, the job's last error
    type Attempt = (
        i64,
        i64,
        Option<String>,
        String,
        Option<String>,
        Option<String>,
    );
    let rows: Vec<Attempt> = sqlx::query_as(
        "select a.job_id, a.lease_epoch, a.node_id, a.ended::text, a.error_class::text,
                j.last_error
         from job_attempt a join job j using (job_id)
         where j.lease_epoch <> 1
         order by a.job_id, a.lease_epoch",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    rows.iter()
        .map(|(job, epoch, node, ended, class, error)| {
            format!(
                "\n  job {job} epoch {epoch} on {node:?}: {ended} {class:?} (last error {error:?})"
            )
        })
        .collect()
}

async fn pool_of(opts: PgConnectOptions, size: u32) -> PgPool {
    PgPoolOptions::new()
        .max_connections(size)
        .connect_with(opts)
        .await
        .unwrap()
}

#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn three_nodes_drain_300_jobs_across_two_replicas_exactly_once(
    _: PgPoolOptions,
    opts: PgConnectOptions,
) {
    let (pool_a, pool_b) = (pool_of(opts.clone(), 10).await, pool_of(opts, 10).await);
    let a = coordinator(&pool_a, "15s").await;
    let b = coordinator(&pool_b, "15s").await;
    let nodes = [
        start_node(a.grpc_addr, "node-1", 2, NODE_TOKEN),
        start_node(b.grpc_addr, "node-2", 2, NODE_TOKEN),
        start_node(a.grpc_addr, "node-3", 2, NODE_TOKEN),
    ];
    // Jobs are enqueued through both replicas while the nodes work.
    let names: Vec<String> = (0..300)
        .map(|i| format!("sleep:{} ok:{}", i % 7, 1000 + i))
        .collect();
    enqueue(&a, &names[..150]).await;
    enqueue(&b, &names[150..]).await;

    let done = wait_for_count(
        &pool_a,
        "select count(*) from job where state = 'done'",
        300,
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(done, 300);
    assert_eq!(
        scalar(&pool_a, "select count(*) from job where lease_epoch <> 1").await,
        0,
        "a job ran twice"
    );
    assert_eq!(
        scalar(
            &pool_a,
            "select count(*) from job_attempt where ended = 'done'"
        )
        .await,
        300
    );
    assert_eq!(scalar(&pool_a, "select count(*) from offer").await, 300);
    assert_eq!(
        scalar(&pool_a, "select count(*) from stale_report").await,
        0
    );
    let per_node = scalar(&pool_a, "select count(distinct node_id) from job_attempt").await;
    assert_eq!(per_node, 3, "every node took part");
    for n in nodes {
        n.stop.cancel();
        n.task.await.unwrap().unwrap();
    }
    a.shutdown().await;
    b.shutdown().await;
}

#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn a_lost_node_job_goes_to_another_node_after_the_grace_period(pool: PgPool) {
    let c = coordinator(&pool, "1s").await;
    let lost = start_node(c.grpc_addr, "node-lost", 1, NODE_TOKEN);
    lost.handle
        .wait_for(|s| s.running_jobs == 0 && s.stream_id.is_some())
        .await;
    let job = enqueue(&c, &["hang".to_owned()]).await[0];
    lost.handle.wait_for(|s| s.running_jobs == 1).await;
    // The node process dies without a goodbye.
    lost.task.abort();
    let _ = lost.task.await;
    let started = tokio::time::Instant::now();

    // After the grace period (not before) the job is queued again, as a reclaim.
    let n = wait_for_count(
        &pool,
        "select count(*) from job where state = 'queued' and reclaims = 1",
        1,
        Duration::from_secs(10),
    )
    .await;
    assert_eq!(n, 1, "the job was not taken back");
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "released before the grace period"
    );
    let (epoch, attempts): (i64, i16) =
        sqlx::query_as("select lease_epoch, attempts from job where job_id = $1")
            .bind(job)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!((epoch, attempts), (1, 0), "a reclaim is not an attempt");

    // Another node picks it up (epoch 2); cancelling the search's job stops it there.
    let other = start_node(c.grpc_addr, "node-other", 1, NODE_TOKEN);
    other.handle.wait_for(|s| s.running_jobs == 1).await;
    let lease_epoch: i64 = sqlx::query_scalar("select lease_epoch from job where job_id = $1")
        .bind(job)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(lease_epoch, 2);
    let search_id: i64 = sqlx::query_scalar("select search_id from search_item where job_id = $1")
        .bind(job)
        .fetch_one(&pool)
        .await
        .unwrap();
    let cancelled = Searches::new(c.queue.clone())
        .cancel(search_id, None)
        .await
        .unwrap();
    assert_eq!(cancelled.cancelling_running, 1);
    other.handle.wait_for(|s| s.running_jobs == 0).await;
    other.stop.cancel();
    other.task.await.unwrap().unwrap();
    c.shutdown().await;
}

#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn a_restarted_coordinator_reattaches_running_jobs_and_loses_no_report(
    _: PgPoolOptions,
    opts: PgConnectOptions,
) {
    let pool = pool_of(opts, 10).await;
    let first = coordinator(&pool, "15s").await;
    let addr = first.grpc_addr;
    let nodes = [
        start_node(addr, "node-1", 2, NODE_TOKEN),
        start_node(addr, "node-2", 2, NODE_TOKEN),
    ];
    let names: Vec<String> = (0..40)
        .map(|i| format!("sleep:{} ok", 300 + i * 10))
        .collect();
    enqueue(&first, &names).await;
    for n in &nodes {
        n.handle.wait_for(|s| s.running_jobs > 0).await;
    }
    // Crash: no drain, no goodbye. Start a new coordinator on the same address.
    first.abort().await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let second = coordinator_at(&pool, &addr.to_string(), "15s").await;

    let done = wait_for_count(
        &pool,
        "select count(*) from job where state = 'done'",
        40,
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(done, 40, "not every job finished after the restart");
    // Jobs the nodes were running are re-attached (lease epoch still 1). The only re-runs
    // allowed are claims whose Assign the crash swallowed: the node never saw them, so its
    // Hello does not list them and they are reclaimed (not failed, not expired) — at most
    // one per slot.
    let rerun = scalar(&pool, "select count(*) from job where lease_epoch <> 1").await;
    assert!(rerun <= 4, "{rerun} jobs re-run; the nodes had 4 slots");
    assert_eq!(
        scalar(
            &pool,
            "select count(*) from job where lease_epoch <> 1 and (reclaims = 0 or attempts > 0)"
        )
        .await,
        0,
        "a running job was re-run instead of re-attached; its attempts: {}",
        attempt_log(&pool).await
    );
    assert_eq!(
        scalar(
            &pool,
            "select count(*) from job_attempt where ended = 'done'"
        )
        .await,
        40,
        "a job completed twice"
    );
    assert_eq!(
        scalar(&pool, "select count(*) from offer").await,
        40,
        "a report was lost"
    );
    assert!(
        nodes.iter().all(|n| n.handle.status().connects >= 2),
        "the nodes did not reconnect"
    );
    for n in nodes {
        n.stop.cancel();
        n.task.await.unwrap().unwrap();
    }
    second.shutdown().await;
}

#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn drain_finishes_the_running_job_and_takes_no_new_one(pool: PgPool) {
    let c = coordinator(&pool, "15s").await;
    let node = start_node(c.grpc_addr, "node-d", 1, NODE_TOKEN);
    node.handle.wait_for(|s| s.stream_id.is_some()).await;
    let first = enqueue(&c, &["sleep:800 ok:5000".to_owned()]).await[0];
    node.handle.wait_for(|s| s.running_jobs == 1).await;
    let later = enqueue(&c, &["ok:6000".to_owned()]).await[0];
    assert!(
        lps_coordinator::control::request_drain(&pool, "node-d")
            .await
            .unwrap()
    );
    // The node finishes its job, hands nothing back, says goodbye and returns Ok.
    tokio::time::timeout(Duration::from_secs(10), node.task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let state = |id: i64| {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, String>("select state::text from job where job_id = $1")
                .bind(id)
                .fetch_one(&pool)
                .await
                .unwrap()
        }
    };
    assert_eq!(state(first).await, "done");
    assert_eq!(
        state(later).await,
        "queued",
        "a draining node took a new job"
    );
    assert_eq!(
        scalar(
            &pool,
            "select count(*) from node_session where disconnected_at is null"
        )
        .await,
        0
    );
    c.shutdown().await;
}

#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn a_node_with_a_bad_token_is_refused(pool: PgPool) {
    let c = coordinator(&pool, "15s").await;
    let node = start_node(c.grpc_addr, "node-x", 1, "not-the-node-token-000000");
    let err = tokio::time::timeout(Duration::from_secs(10), node.task)
        .await
        .unwrap()
        .unwrap()
        .unwrap_err();
    assert!(
        matches!(
            err,
            NodeError::Refused {
                code: tonic::Code::Unauthenticated,
                ..
            }
        ),
        "{err}"
    );
    c.shutdown().await;
}

/// A rolling update: the replica a node is connected to shuts down; the node is told to
/// reconnect (not to drain), reaches the other replica and re-attaches its running jobs.
/// Nothing is handed back, nothing charged, nothing run twice, and the node keeps running.
#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn a_coordinator_shutdown_moves_its_nodes_to_another_replica(
    _: PgPoolOptions,
    opts: PgConnectOptions,
) {
    let (pool_a, pool_b) = (pool_of(opts.clone(), 10).await, pool_of(opts, 10).await);
    let a = coordinator(&pool_a, "15s").await;
    let b = coordinator(&pool_b, "15s").await;
    let service = Balancer::spawn(a.grpc_addr).await;
    let node = start_node(service.addr, "node-r", 4, NODE_TOKEN);
    let names: Vec<String> = (0..8)
        .map(|i| format!("sleep:{} ok", 2_000 + i * 100))
        .collect();
    enqueue(&a, &names).await;
    node.handle.wait_for(|s| s.running_jobs == 4).await;

    service.target.send_replace(b.grpc_addr);
    a.shutdown().await;
    let done = wait_for_count(
        &pool_b,
        "select count(*) from job where state = 'done'",
        8,
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(done, 8, "{}", attempt_log(&pool_b).await);
    assert_eq!(
        scalar(
            &pool_b,
            "select count(*) from job_attempt where ended <> 'done'"
        )
        .await,
        0,
        "an attempt was handed back, reclaimed or charged: {}",
        attempt_log(&pool_b).await
    );
    assert_eq!(
        scalar(&pool_b, "select count(*) from job where lease_epoch <> 1").await,
        0,
        "a job ran twice"
    );
    assert!(
        !node.task.is_finished(),
        "the node stopped with the coordinator"
    );
    assert!(
        node.handle.status().connects >= 2,
        "the node did not reconnect"
    );
    let on_b: String =
        sqlx::query_scalar("select coordinator_id from node_session where node_id = 'node-r'")
            .fetch_one(&pool_b)
            .await
            .unwrap();
    let connected = scalar(
        &pool_b,
        "select count(*) from node_session where node_id = 'node-r' and disconnected_at is null",
    )
    .await;
    assert_eq!(connected, 1);
    assert!(!on_b.is_empty());
    node.stop.cancel();
    node.task.await.unwrap().unwrap();
    b.shutdown().await;
}

/// A replica that crashed leaves its streams marked connected; ListNodes and the ops
/// figures stop counting a stream not seen for 90 s, and a replica starting under the
/// crashed one's id marks them disconnected at once.
#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn a_crashed_coordinators_nodes_do_not_show_as_connected(pool: PgPool) {
    let flags = ["--coordinator-id", "coord-x", "--malls", MALL];
    let first = common::start_with_mall(&pool, MALL, &flags).await;
    let node = start_node(first.grpc_addr, "node-c", 1, NODE_TOKEN);
    node.handle.wait_for(|s| s.stream_id.is_some()).await;
    first.abort().await;
    node.stop.cancel();
    node.task.abort();
    // NB: `abort` still lets the stream task mark its row; a killed process leaves it as this.
    sqlx::query("update node_session set disconnected_at = null")
        .execute(&pool)
        .await
        .unwrap();
    let connected = "select count(*) from node_session where disconnected_at is null";
    assert_eq!(scalar(&pool, connected).await, 1);

    // Seen 2 minutes ago: not listed, not counted.
    sqlx::query("update node_session set last_seen_at = now() - interval '2 minutes'")
        .execute(&pool)
        .await
        .unwrap();
    let fleet = lps_coordinator::fleet::Fleet::new(pool.clone());
    let nodes = fleet.nodes().await.unwrap();
    assert!(nodes.is_empty(), "{nodes:?}");
    let fleet = fleet.figures().await.unwrap();
    assert_eq!(fleet.nodes_connected, 0);

    // A replica under the crashed one's id marks its streams disconnected when it starts.
    sqlx::query("update node_session set last_seen_at = now()")
        .execute(&pool)
        .await
        .unwrap();
    let again = common::start_with_mall(&pool, MALL, &flags).await;
    assert_eq!(scalar(&pool, connected).await, 0);
    again.shutdown().await;
}

/// Replicas share the mall settings: one of an older LPS_CONFIG_REVISION starting later
/// writes nothing over a newer one's; the same or a newer revision writes its own.
#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn an_older_config_revision_does_not_overwrite_the_mall_settings(pool: PgPool) {
    let enabled = |mall: &'static str| {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, bool>("select enabled from mall where mall_id = $1")
                .bind(mall)
                .fetch_one(&pool)
                .await
                .unwrap()
        }
    };
    let start = |revision: &'static str, malls: &'static str| {
        let pool = pool.clone();
        async move { common::start(&pool, &["--config-revision", revision, "--malls", malls]).await }
    };
    start("2", "testmall-alpha").await.shutdown().await;
    assert!(enabled("testmall-alpha").await && !enabled("testmall-beta").await);

    start("1", "testmall-beta").await.shutdown().await;
    assert!(
        enabled("testmall-alpha").await && !enabled("testmall-beta").await,
        "revision 1 undid revision 2's settings"
    );
    start("2", "testmall-alpha,testmall-beta")
        .await
        .shutdown()
        .await;
    assert!(
        enabled("testmall-beta").await,
        "the same revision writes its settings"
    );
    start("3", "testmall-beta").await.shutdown().await;
    assert!(!enabled("testmall-alpha").await && enabled("testmall-beta").await);
}

/// A run that ends for want of a proxy port (the scripted `defer`, as the browser executor
/// ends one when no port frees in time) goes back to the queue until then: a hand-back, no
/// attempt, through a real node's report path.
#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn a_run_without_a_proxy_port_is_handed_back_until_one_frees(pool: PgPool) {
    let c = coordinator(&pool, "15s").await;
    let node = start_node(c.grpc_addr, "node-p", 1, NODE_TOKEN);
    let job = enqueue(&c, &["defer:30000".to_owned()]).await[0];
    let handed_back = wait_for_count(
        &pool,
        "select count(*) from job_attempt where ended = 'handed_back'",
        1,
        Duration::from_secs(20),
    )
    .await;
    assert_eq!(handed_back, 1, "{}", attempt_log(&pool).await);
    let (state, attempts, waits): (String, i16, f64) = sqlx::query_as(
        "select state::text, attempts, extract(epoch from run_after - now())::float8
         from job where job_id = $1",
    )
    .bind(job)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!((state.as_str(), attempts), ("queued", 0));
    assert!(
        (20.0..=30.5).contains(&waits),
        "runs again when the port frees: {waits}s"
    );
    node.stop.cancel();
    node.task.await.unwrap().unwrap();
    c.shutdown().await;
}
