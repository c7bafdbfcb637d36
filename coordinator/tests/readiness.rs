//! Readiness follows the database: a real coordinator whose pool reaches PostgreSQL through
//! a TCP forwarder the test controls. Cutting the forwarder (open connections closed, new
//! ones accepted and left hanging, as in a network partition) turns gRPC health
//! NOT_SERVING and `/readyz` 503 within about a second; restoring it turns both back.

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::Duration,
};

use sqlx::{
    PgPool,
    postgres::{PgConnectOptions, PgPoolOptions},
};
use tokio::{
    net::{TcpListener, TcpStream},
    sync::watch,
};
use tonic_health::pb::{
    HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
};

mod common;

/// A loopback TCP forwarder to `upstream` that can be cut (open connections closed, new
/// ones accepted and held without an answer) and restored.
struct Forwarder {
    addr: SocketAddr,
    cut: watch::Sender<bool>,
}

impl Forwarder {
    async fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (cut, watch) = watch::channel(false);
        let held: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        tokio::spawn(async move {
            loop {
                let Ok((mut client, _)) = listener.accept().await else {
                    return;
                };
                if *watch.borrow() {
                    // Partitioned: the connection opens and nothing ever answers.
                    held.lock().unwrap().push(client);
                    continue;
                }
                held.lock().unwrap().clear();
                let mut watch = watch.clone();
                tokio::spawn(async move {
                    let Ok(mut server) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        _ = watch.wait_for(|cut| *cut) => {}
                    }
                });
            }
        });
        Self { addr, cut }
    }

    fn set_cut(&self, cut: bool) {
        self.cut.send_replace(cut);
    }
}

async fn status(health: &mut HealthClient<tonic::transport::Channel>, service: &str) -> i32 {
    health
        .check(HealthCheckRequest {
            service: service.into(),
        })
        .await
        .map_or(-1, |r| r.into_inner().status)
}

/// Polls until gRPC health of every LPS service is `want`; the time it took, or a panic
/// after `bound`.
async fn wait_health(
    health: &mut HealthClient<tonic::transport::Channel>,
    want: ServingStatus,
    bound: Duration,
) -> Duration {
    let start = tokio::time::Instant::now();
    loop {
        let mut all = true;
        for service in [
            "",
            "lps.v1.SearchService",
            "lps.v1.NodeService",
            "lps.v1.OpsService",
            "lps.v1.ScheduleService",
        ] {
            all &= status(health, service).await == want as i32;
        }
        if all {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < bound,
            "health not {want:?} within {bound:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `/readyz`: its status and how long it took to answer.
async fn readyz(addr: SocketAddr) -> (u16, String, Duration) {
    let start = tokio::time::Instant::now();
    let r = reqwest::get(format!("http://{addr}/readyz")).await.unwrap();
    let status = r.status().as_u16();
    (status, r.text().await.unwrap(), start.elapsed())
}

#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn health_follows_the_database_through_a_cut_and_back(
    _: PgPoolOptions,
    opts: PgConnectOptions,
) {
    let upstream: SocketAddr = tokio::net::lookup_host((opts.get_host(), opts.get_port()))
        .await
        .unwrap()
        .next()
        .unwrap();
    let fwd = Forwarder::start(upstream).await;
    let own: PgPool = PgPoolOptions::new()
        .max_connections(10)
        .connect_with(opts.clone().host("127.0.0.1").port(fwd.addr.port()))
        .await
        .unwrap();
    let coordinator = common::start_on(own, &[]).await;
    let channel =
        tonic::transport::Channel::from_shared(format!("http://{}", coordinator.grpc_addr))
            .unwrap()
            .connect()
            .await
            .unwrap();
    let mut health = HealthClient::new(channel);
    wait_health(&mut health, ServingStatus::Serving, Duration::from_secs(3)).await;
    let (code, _, _) = readyz(coordinator.http_addr).await;
    assert_eq!(code, 200);

    fwd.set_cut(true);
    let flipped = wait_health(
        &mut health,
        ServingStatus::NotServing,
        Duration::from_secs(3),
    )
    .await;
    eprintln!("cut: NOT_SERVING after {flipped:?}");
    let (code, body, took) = readyz(coordinator.http_addr).await;
    eprintln!("cut: /readyz {code} {body:?} in {took:?}");
    assert_eq!((code, body.as_str()), (503, "database unreachable"));
    assert!(took < Duration::from_secs(1), "/readyz took {took:?}");
    let metrics = reqwest::get(format!("http://{}/metrics", coordinator.http_addr))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(metrics.contains("lps_database_reachable 0"), "{metrics}");

    fwd.set_cut(false);
    let back = wait_health(&mut health, ServingStatus::Serving, Duration::from_secs(5)).await;
    eprintln!("restored: SERVING after {back:?}");
    let (code, _, _) = readyz(coordinator.http_addr).await;
    assert_eq!(code, 200);

    coordinator.shutdown().await;
}
