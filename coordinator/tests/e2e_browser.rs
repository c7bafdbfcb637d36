//! The whole system with real parts: PostgreSQL, the coordinator (gRPC on 127.0.0.1), a
//! crawler node driving headless Chromium through the proxy ledger's ports of the test
//! kit's gateway, and the test kit's two malls. The expected answers come from the test
//! catalog, never from LPS. A schedule's price-move rule fires once when the mall's price
//! drops at run time (`/_control/price`).

use std::{path::Path, sync::Arc, time::Duration};

use lps_coordinator::app::Running;
use lps_crawler_node::{
    BrowserExecutor, Config as NodeConfig, Node, NodeError, executor::browser::BrowserSettings,
    proxy::NodeLink,
};
use lps_proto::pb::{self, search_service_client::SearchServiceClient};
use lps_test_kit::{
    MallStyle,
    catalog::Catalog,
    gateway::GatewayConfig,
    stack::{Stack, StackConfig, StackHandle},
};
use sqlx::PgPool;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;

mod common;

use common::{CLIENT_TOKEN, NODE_TOKEN, TempDir, gateway_ports};

const PROXY_USER: &str = "lps-e2e";
const PROXY_PASSWORD: &str = "gateway-password-e2e-77";

struct System {
    stack: StackHandle,
    /// Taken by [`System::stop`].
    coordinator: Option<Running>,
    node_stop: CancellationToken,
    node: JoinHandle<Result<(), NodeError>>,
    browsers: BrowserExecutor,
    _dir: TempDir,
}

async fn start(pool: &PgPool, block_after: Option<u32>, ports: usize) -> System {
    start_with(
        pool,
        block_after,
        ports,
        "testmall-alpha,testmall-beta",
        &[],
    )
    .await
}

/// [`start`] with these malls enabled and more coordinator flags.
async fn start_with(
    pool: &PgPool,
    block_after: Option<u32>,
    ports: usize,
    malls: &str,
    more_flags: &[&str],
) -> System {
    let mut stack_config = StackConfig::new(ports);
    stack_config.gateway = GatewayConfig::new(ports).with_credentials(PROXY_USER, PROXY_PASSWORD);
    stack_config.block_after = block_after;
    let stack = Stack::start(stack_config).await.unwrap();
    let dir = TempDir::new("e2e-profiles");
    stack.write_site_profiles(&dir.0).unwrap();
    let port_list = gateway_ports(&stack).join(",");
    let mut flags = vec![
        "--profiles-dir",
        dir.0.to_str().unwrap(),
        "--malls",
        malls,
        "--proxy-gateway-host",
        "127.0.0.1",
        "--proxy-ports",
        &port_list,
        "--proxy-username",
        PROXY_USER,
        "--proxy-password",
        PROXY_PASSWORD,
        "--ip-request-budget",
        "3",
        "--job-deadline",
        "120s",
        "--proxy-block-cooldown-base",
        "2s",
        "--proxy-block-cooldown-cap",
        "5s",
        "--proxy-rest",
        "1s",
    ];
    flags.extend_from_slice(more_flags);
    let coordinator = common::start(pool, &flags).await;

    let mut node_config = NodeConfig::new(format!("http://{}", coordinator.grpc_addr), NODE_TOKEN);
    node_config.node_id = "e2e-node".into();
    node_config.slots = 2;
    node_config.drain_timeout = Duration::from_secs(30);
    node_config.profile_root = dir.0.join("browser-profiles");
    let (link, inbox) = NodeLink::channel();
    let browsers = BrowserExecutor::new(BrowserSettings::from_config(&node_config))
        .with_events(Arc::new(link.clone()))
        .with_proxies(Arc::new(link));
    let node = Node::new(node_config, browsers.clone()).with_link(inbox);
    let node_stop = CancellationToken::new();
    let node = tokio::spawn(node.run(node_stop.clone()));
    System {
        stack,
        coordinator: Some(coordinator),
        node_stop,
        node,
        browsers,
        _dir: dir,
    }
}

impl System {
    async fn client(&self) -> SearchServiceClient<Channel> {
        let addr = self.coordinator.as_ref().expect("running").grpc_addr;
        let channel = Channel::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
            .unwrap();
        SearchServiceClient::new(channel)
    }

    async fn search(&self, names: &[&str]) -> pb::SearchResponse {
        let request = common::with_token(
            pb::SearchRequest {
                products: names
                    .iter()
                    .map(|n| pb::Product {
                        code: String::new(),
                        name: (*n).into(),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            },
            CLIENT_TOKEN,
        );
        self.client()
            .await
            .search(request)
            .await
            .unwrap()
            .into_inner()
    }

    async fn wait_final(&self, search_id: i64) -> pb::SearchStatus {
        let mut client = self.client().await;
        common::wait_final(
            &mut client,
            CLIENT_TOKEN,
            search_id,
            Duration::from_secs(240),
        )
        .await
    }

    async fn stop(mut self) {
        self.node_stop.cancel();
        let drained = tokio::time::timeout(Duration::from_secs(60), &mut self.node).await;
        self.browsers.shutdown().await;
        if let Some(coordinator) = self.coordinator.take() {
            coordinator.shutdown().await;
        }
        // The test kit's servers stop when `self.stack` is dropped.
        drained
            .expect("the node did not drain in time")
            .unwrap()
            .expect("the node drained with an error");
    }
}

impl Drop for System {
    /// A failing test must not leave Chromium behind either.
    fn drop(&mut self) {
        self.browsers.kill_now();
    }
}

fn lowest_from_catalog(name: &str) -> i64 {
    let catalog = Catalog::builtin();
    let product = catalog
        .products()
        .iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("{name} not in the catalog"));
    i64::try_from(product.lowest().unwrap().effective_price()).unwrap()
}

fn chromium_left(tag: &Path) -> usize {
    let out = std::process::Command::new("pgrep")
        .arg("-f")
        .arg(tag.to_str().unwrap())
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).lines().count()
}

#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn five_products_over_two_malls_report_the_catalogs_lowest_prices(pool: PgPool) {
    let system = start(&pool, None, 4).await;
    let catalog = Catalog::builtin();
    let names: Vec<&str> = catalog
        .products()
        .iter()
        .filter(|p| p.decoy_of.is_none() && p.listings.len() == 2)
        .take(5)
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(names.len(), 5);
    let accepted = system.search(&names).await;
    assert_eq!(accepted.items.len(), 10, "5 products x 2 malls");
    let status = system.wait_final(accepted.search_id).await;
    for (product, name) in status.products.iter().zip(&names) {
        let lowest = product
            .lowest
            .as_ref()
            .unwrap_or_else(|| panic!("no offer for {name}: {product:#?}"));
        assert_eq!(
            lowest.effective_price,
            Some(lowest_from_catalog(name)),
            "{name}: {product:#?}"
        );
        assert!(
            product
                .malls
                .iter()
                .all(|m| m.state == pb::JobState::Done as i32),
            "{product:#?}"
        );
    }
    // The reaper's sweep records one price-history entry per product, with the same lowest.
    let mut history: Vec<(String, i64)> = Vec::new();
    for _ in 0..50 {
        history = sqlx::query_as("select product_key, lowest_effective_price from price_history")
            .fetch_all(&pool)
            .await
            .unwrap();
        if history.len() >= 5 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(history.len(), 5, "{history:?}");
    for name in &names {
        let key = format!(
            "name:{}",
            name.to_lowercase()
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        );
        let entry = history
            .iter()
            .find(|(k, _)| *k == key)
            .unwrap_or_else(|| panic!("no history for {key}: {history:?}"));
        assert_eq!(entry.1, lowest_from_catalog(name));
    }
    // Every IP session was recorded, and the jobs report their proxy bytes.
    let sessions: i64 = sqlx::query_scalar("select count(*) from ip_session")
        .fetch_one(&pool)
        .await
        .unwrap();
    let bytes: i64 = sqlx::query_scalar("select coalesce(sum(bytes), 0)::bigint from job")
        .fetch_one(&pool)
        .await
        .unwrap();
    let profiles = system._dir.0.clone();
    system.stop().await;
    assert!(bytes > 0, "no proxy bytes were metered");
    let after_stop: i64 = sqlx::query_scalar("select count(*) from ip_session")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(
        after_stop >= sessions && after_stop > 0,
        "IP sessions were not recorded ({after_stop})"
    );
    let held: i64 =
        sqlx::query_scalar("select count(*) from proxy_port where holder_node is not null")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(held, 0, "the drained node still holds proxy ports");
    assert_eq!(
        chromium_left(&profiles),
        0,
        "Chromium processes were left behind"
    );
}

#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn an_absent_product_is_not_found_then_answered_from_the_negative_cache(pool: PgPool) {
    let system = start(&pool, None, 4).await;
    let name = "존재하지 않는 상품 4242";
    let first = system.search(&[name]).await;
    let status = system.wait_final(first.search_id).await;
    for mall in &status.products[0].malls {
        assert_eq!(mall.outcome, pb::Outcome::NotFound as i32, "{mall:#?}");
    }
    // Each entry names what judged it: the real node's judge and the same vocabulary
    // revision the coordinator computes for the mall from what its Welcome sent.
    let judge = system
        .coordinator
        .as_ref()
        .unwrap()
        .queue
        .current_judge()
        .unwrap()
        .clone();
    let entries: Vec<(String, String, Option<i32>, Option<String>)> = sqlx::query_as(
        "select j.mall, n.kind, n.judge_version, n.vocabulary_revision
         from negative_cache n join job j using (job_id) order by j.mall",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(entries.len(), status.products[0].malls.len(), "{entries:?}");
    for (mall, kind, version, revision) in &entries {
        assert_eq!(
            *version,
            i32::try_from(lps_proto::model::JUDGE_VERSION).ok()
        );
        assert_eq!(revision.as_deref(), Some(judge.revision(mall)), "{mall}");
        assert!(kind == "no_results" || kind == "judged", "{kind}");
    }
    let searches_before = system.stack.alpha.stats().searches.values().sum::<u64>();
    let again = system.search(&[name]).await;
    assert!(
        again
            .items
            .iter()
            .all(|i| i.disposition == pb::Disposition::CachedNotFound as i32),
        "{again:#?}"
    );
    let status = system.wait_final(again.search_id).await;
    assert!(status.r#final);
    assert_eq!(
        system.stack.alpha.stats().searches.values().sum::<u64>(),
        searches_before,
        "the repeat crawled"
    );
    system.stop().await;
}

#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn a_blocked_exit_ip_rotates_cools_down_and_the_job_is_still_done(pool: PgPool) {
    // The exit IP the ledger hands out first (least recently used, lowest port) is blocked
    // by both malls: the first search on it meets the block page and must rotate.
    let system = start(&pool, None, 3).await;
    let first = system
        .stack
        .gateway
        .ports()
        .into_iter()
        .min_by_key(|p| p.addr.port())
        .unwrap()
        .label;
    system.stack.alpha.block_exit(&first);
    system.stack.beta.block_exit(&first);
    let catalog = Catalog::builtin();
    let names: Vec<&str> = catalog
        .products()
        .iter()
        .filter(|p| p.decoy_of.is_none() && p.listings.len() == 2)
        .take(2)
        .map(|p| p.name.as_str())
        .collect();
    let accepted = system.search(&names).await;
    let status = system.wait_final(accepted.search_id).await;
    for (product, name) in status.products.iter().zip(&names) {
        let lowest = product
            .lowest
            .as_ref()
            .unwrap_or_else(|| panic!("no offer for {name}: {product:#?}"));
        assert_eq!(lowest.effective_price, Some(lowest_from_catalog(name)));
        assert!(
            product
                .malls
                .iter()
                .all(|m| m.state == pb::JobState::Done as i32),
            "{product:#?}"
        );
    }
    let blocks: i64 = sqlx::query_scalar("select count(*) from bot_detection")
        .fetch_one(&pool)
        .await
        .unwrap();
    let block_sessions: i64 =
        sqlx::query_scalar("select count(*) from ip_session where end_reason = 'block'")
            .fetch_one(&pool)
            .await
            .unwrap();
    // The cooldown is seconds long here and may be over by now on a slow machine: what
    // must hold is that each block put a cooldown on its port for its mall, ending after
    // the block.
    let cooling: i64 = sqlx::query_scalar(
        "select count(*) from ip_session s
         join proxy_port_cooldown c on c.host = s.host and c.port = s.port and c.mall = s.mall
         where s.end_reason = 'block' and c.cooldown_until > s.ended_at",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    system.stop().await;
    assert!(blocks >= 1, "no BlockEvent was recorded");
    assert!(block_sessions >= 1, "no IP session ended with a block");
    assert!(
        cooling >= 1,
        "no block put its port in a cooldown for the mall"
    );
}

/// The gamma mall through the whole system: every product's `lowest` is the catalog's
/// truth (traps and all), a cheaper offer of unknown shipping is `possibly_lower` beside
/// it; after the mall's redesign every job is dead `layout` after one attempt and the
/// `layout_changed` alert posts once.
#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn gamma_answers_are_the_truth_and_a_redesign_is_a_layout_alert_once(pool: PgPool) {
    let (hook, posts) = common::webhook().await;
    let hook = format!("http://{hook}/hook");
    let system = start_with(
        &pool,
        None,
        3,
        "testmall-gamma",
        &[
            "--alert-interval",
            "1s",
            "--alert-for",
            "0s",
            "--alert-resolve-after",
            "0s",
            "--alert-webhook-url",
            &hook,
            "--alert-layout-share",
            "0.2",
            "--alert-layout-min-attempts",
            "3",
        ],
    )
    .await;
    let catalog = system.stack.gamma.catalog().clone();
    let products: Vec<_> = catalog
        .products()
        .iter()
        .filter(|p| {
            p.truth(MallStyle::Gamma)
                .is_some_and(|t| t.lowest.is_some())
        })
        .collect();
    let names: Vec<&str> = products.iter().map(|p| p.name.as_str()).collect();
    assert!(names.len() >= 7, "{names:?}");
    let accepted = system.search(&names).await;
    let status = system.wait_final(accepted.search_id).await;
    for (product, answer) in products.iter().zip(&status.products) {
        let truth = product.truth(MallStyle::Gamma).unwrap();
        let want = truth.lowest.unwrap();
        let lowest = answer
            .lowest
            .as_ref()
            .unwrap_or_else(|| panic!("no lowest for {}: {answer:#?}", product.name));
        assert!(
            lowest.url.ends_with(&want.listing.path)
                && lowest.effective_price == Some(i64::try_from(want.effective_price).unwrap()),
            "{}: lowest {} at {} ({}), the truth is {} at {}",
            product.name,
            lowest.title,
            lowest.effective_price.unwrap_or_default(),
            lowest.url,
            want.listing.id,
            want.effective_price
        );
        assert_ne!(lowest.shipping, pb::ShippingStatus::Unknown as i32);
        match truth.possibly_lower {
            Some(lower) => {
                let beside = answer.possibly_lower.as_ref().unwrap_or_else(|| {
                    panic!("{}: {} not reported beside", product.name, lower.listing.id)
                });
                assert!(beside.url.ends_with(&lower.listing.path), "{beside:?}");
                assert_eq!(beside.shipping, pb::ShippingStatus::Unknown as i32);
            }
            None => assert!(
                answer.possibly_lower.is_none(),
                "{}: {answer:#?}",
                product.name
            ),
        }
    }

    system.stack.gamma.set_layout_changed(true);
    let changed = &names[..4];
    let accepted = system.search(changed).await;
    let status = system.wait_final(accepted.search_id).await;
    for answer in &status.products {
        for mall in &answer.malls {
            assert_eq!(mall.state, pb::JobState::Dead as i32, "{answer:#?}");
            assert_eq!(
                mall.error_class,
                pb::ErrorClass::Layout as i32,
                "{answer:#?}"
            );
            assert_eq!(mall.attempts, 1, "no retry on the same markup: {answer:#?}");
        }
    }
    let layout = |p: &str| p.contains("layout_changed");
    let fired = common::wait_for_posts(&posts, 1, |p| layout(p) && p.contains("firing")).await;
    assert_eq!(fired.len(), 1, "{:?}", posts.lock().unwrap());
    assert!(fired[0].contains("testmall-gamma"), "{fired:?}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let all: Vec<String> = posts
        .lock()
        .unwrap()
        .iter()
        .filter(|p| layout(p))
        .cloned()
        .collect();
    assert_eq!(all.len(), 1, "one post per firing: {all:?}");
    system.stack.gamma.set_layout_changed(false);
    system.stop().await;
}

/// The bodies a loopback webhook receiver (`POST /watch`) got, in order.
type Bodies = Arc<std::sync::Mutex<Vec<String>>>;

async fn receiver() -> (std::net::SocketAddr, Bodies) {
    use axum::{Router, body::Bytes, extract::State, routing::post};
    let bodies: Bodies = Arc::default();
    let app = Router::new()
        .route(
            "/watch",
            post(|State(b): State<Bodies>, body: Bytes| async move {
                b.lock()
                    .unwrap()
                    .push(String::from_utf8(body.to_vec()).unwrap());
                "ok"
            }),
        )
        .with_state(bodies.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (addr, bodies)
}

/// The schedule's evaluated run and its observation of product 0 (run, price), if any.
async fn observed(pool: &PgPool, schedule_id: i64) -> (i32, Option<(i32, i64)>) {
    let evaluated: i32 =
        sqlx::query_scalar("select evaluated_run from schedule where schedule_id = $1")
            .bind(schedule_id)
            .fetch_one(pool)
            .await
            .unwrap();
    let observation: Option<(i32, i64)> = sqlx::query_as(
        "select run_number, lowest_effective_price from schedule_observation
         where schedule_id = $1 and product_index = 0",
    )
    .bind(schedule_id)
    .fetch_optional(pool)
    .await
    .unwrap();
    (evaluated, observation)
}

#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn a_price_drop_in_the_mall_fires_one_price_move_of_a_schedule(pool: PgPool) {
    use lps_proto::pb::schedule_service_client::ScheduleServiceClient;
    const NAME: &str = "삼다수 2L x 12";
    let (addr, bodies) = receiver().await;
    let destination = format!("watch=http://{addr}/watch");
    let system = start_with(
        &pool,
        None,
        4,
        "testmall-alpha",
        &[
            "--destinations",
            &destination,
            "--destination-secrets",
            "watch=secret-of-watch-0123456789",
            "--delivery-poll",
            "100ms",
            "--schedule-poll",
            "200ms",
            "--schedule-min-interval",
            "1s",
        ],
    )
    .await;
    // What the catalog says alpha's lowest is, and its listing.
    let catalog = system.stack.alpha.catalog().clone();
    let truth = catalog
        .products()
        .iter()
        .find(|p| p.name == NAME)
        .and_then(|p| p.truth(MallStyle::Alpha))
        .and_then(|t| t.lowest)
        .unwrap();
    let before = i64::try_from(truth.effective_price).unwrap();
    let listing = truth.listing.id.clone();
    let target = before - 1000;
    let channel = Channel::from_shared(format!(
        "http://{}",
        system.coordinator.as_ref().unwrap().grpc_addr
    ))
    .unwrap()
    .connect()
    .await
    .unwrap();
    let mut schedules = ScheduleServiceClient::new(channel);
    let schedule = schedules
        .create_schedule(common::with_token(
            pb::CreateScheduleRequest {
                products: vec![pb::Product {
                    code: String::new(),
                    name: NAME.into(),
                    ..Default::default()
                }],
                malls: vec!["testmall-alpha".into()],
                interval: Some(prost_types::Duration {
                    seconds: 2,
                    nanos: 0,
                }),
                destinations: vec!["watch".into()],
                rules: vec![pb::PriceMoveRule {
                    below: Some(target),
                    ..Default::default()
                }],
                ..Default::default()
            },
            CLIENT_TOKEN,
        ))
        .await
        .unwrap()
        .into_inner()
        .schedule
        .unwrap();
    let id = schedule.schedule_id;
    let wait = |done: fn(i32, Option<(i32, i64)>, i64) -> bool, what: &'static str| {
        let pool = pool.clone();
        async move {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(240);
            loop {
                let (evaluated, observation) = observed(&pool, id).await;
                if done(evaluated, observation, target) {
                    return (evaluated, observation);
                }
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "{what}: evaluated {evaluated}, observed {observation:?}"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };
    // The first run observes the catalog's price, above the target: nothing fires.
    let (_, first) = wait(|_, o, _| o.is_some(), "a first observation").await;
    assert_eq!(first.unwrap().1, before, "the catalog's lowest");
    assert!(
        bodies.lock().unwrap().is_empty(),
        "no move on the first run"
    );

    // The price drops in the mall's catalog while the schedule runs.
    let new_price = target - 500;
    let client = reqwest::Client::new();
    let answer = client
        .post(format!(
            "{}/_control/price?id={listing}&price={new_price}",
            system.stack.alpha.base_url()
        ))
        .send()
        .await
        .unwrap();
    assert!(answer.status().is_success(), "{answer:?}");

    // A run observes the drop; then one more run, still below the target.
    let (_, dropped) = wait(|_, o, t| o.is_some_and(|(_, p)| p < t), "the drop observed").await;
    let (dropped_run, price) = dropped.unwrap();
    assert_eq!(price, new_price);
    let after = dropped_run + 1;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(240);
    while observed(&pool, id).await.0 < after {
        assert!(
            tokio::time::Instant::now() < deadline,
            "run {after} not evaluated"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    schedules
        .pause_schedule(common::with_token(
            pb::PauseScheduleRequest { schedule_id: id },
            CLIENT_TOKEN,
        ))
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let pending: i64 =
            sqlx::query_scalar("select count(*) from delivery where state <> 'delivered'")
                .fetch_one(&pool)
                .await
                .unwrap();
        if pending == 0 && !bodies.lock().unwrap().is_empty() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{pending} undelivered"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let got = bodies.lock().unwrap().clone();
    assert_eq!(
        got.len(),
        1,
        "exactly one price-move notification: {got:#?}"
    );
    let event: pb::DeliveryEvent =
        lps_proto::json::from_json(&got[0], "lps.v1.DeliveryEvent").unwrap();
    assert_eq!(event.kind, pb::DeliveryEventKind::PriceMove as i32);
    let m = event.price_move.unwrap();
    assert_eq!(m.schedule_id, id);
    assert_eq!(i32::try_from(m.run).unwrap(), dropped_run);
    assert_eq!(m.lowest_effective_price, new_price);
    assert_eq!(m.previous_effective_price, Some(before));
    assert_eq!(m.reasons, vec![pb::PriceMoveReason::BelowTarget as i32]);
    assert_eq!(m.target, Some(target));
    let offer = m.offers.first().expect("the offer that caused it");
    assert_eq!(offer.effective_price, Some(new_price));
    assert!(
        offer.url.ends_with(&format!("/goods/{listing}")),
        "{offer:?}"
    );
    system.stop().await;
}
