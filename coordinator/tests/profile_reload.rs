//! A profile fix without a restart, against the real coordinator (127.0.0.1:0, real
//! PostgreSQL) and a real crawler node: the profile directory is laid out as Kubernetes
//! mounts a ConfigMap (files linked through `..data`, an edit swaps the link), the
//! coordinator watches it, sends a valid edit to the connected node, and the node's next
//! job reads the page with it while a job already running keeps the profile it started
//! with; each lease records the revision it ran; an invalid edit is refused (logged,
//! counted, shown in the ops snapshot) and the loaded profiles kept.
//!
//! The node's executor reads one saved result page with the job's profile through
//! `lps_profiles::extract` (what the browser executor runs on a live page's snapshot), so
//! what changes is the reading itself; no browser is needed for that.

use std::{
    path::Path,
    sync::{Arc, Mutex},
    time::Duration,
};

use lps_coordinator::{
    db::MIGRATOR,
    profiles::revision,
    queue::{EnqueueContext, Queue},
};
use lps_crawler_node::{
    Executor, Job, Node, Outcome, Progress, config::Config as NodeConfig, node::NodeHandle,
};
use lps_proto::model::{
    ErrorClass, JobMetrics, MallId, Offer, Priority, ProductSpec, RoundReport, SearchRequest,
    ShippingStatus,
};
use sqlx::PgPool;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

mod common;

use common::{NODE_TOKEN, TempDir};

const MALL: &str = "testmall-alpha";

/// A saved result page with two prices per card: the list price in `div.product-price`
/// and the sale price in `div.sale-price`.
const PAGE: &str = r#"<html><body><ul>
<li class="product-item">
  <a class="product-link" href="/p/1"><div class="product-title">테스트 상품 500g</div></a>
  <div class="product-price">12,900원</div>
  <div class="sale-price">9,900원</div>
  <div class="product-shipping">무료배송</div>
</li>
</ul></body></html>"#;

/// The built-in alpha profile with its price read by `price`.
fn alpha(price: &str) -> String {
    let text = lps_profiles::format::builtin_text("testmall-alpha.toml").unwrap();
    let edited = text.replace(
        "price = \"div.product-price\"",
        &format!("price = \"{price}\""),
    );
    assert!(
        text.contains("price = \"div.product-price\""),
        "the built-in alpha profile changed its price rule"
    );
    edited
}

/// A profile directory laid out as a mounted ConfigMap: `name -> ..data/name`, `..data ->
/// ..<version>/`. [`ConfigMap::publish`] swaps the `..data` link as the kubelet does.
struct ConfigMap {
    dir: TempDir,
    version: u32,
}

impl ConfigMap {
    fn new(file: &str, text: &str) -> Self {
        let dir = TempDir::new("profile-reload");
        let mut map = Self { dir, version: 0 };
        map.publish(file, text);
        std::os::unix::fs::symlink(Path::new("..data").join(file), map.dir.0.join(file)).unwrap();
        map
    }

    fn publish(&mut self, file: &str, text: &str) {
        self.version += 1;
        let version = format!("..v{}", self.version);
        std::fs::create_dir(self.dir.0.join(&version)).unwrap();
        std::fs::write(self.dir.0.join(&version).join(file), text).unwrap();
        let tmp = self.dir.0.join("..data_tmp");
        std::os::unix::fs::symlink(&version, &tmp).unwrap();
        std::fs::rename(&tmp, self.dir.0.join("..data")).unwrap();
    }

    fn path(&self) -> &str {
        self.dir.0.to_str().unwrap()
    }
}

/// Reads [`PAGE`] with each job's profile. A job whose product starts with `hold` reads
/// only once the test adds a permit to `gate`.
struct PageReader {
    gate: Arc<Semaphore>,
    started: Arc<Semaphore>,
    /// (product name, the price read).
    read: Arc<Mutex<Vec<(String, u64)>>>,
}

#[async_trait::async_trait]
impl Executor for PageReader {
    async fn run(&self, job: Job, _progress: Progress, _cancel: CancellationToken) -> Outcome {
        let name = job.product.name().to_owned();
        self.started.add_permits(1);
        if name.starts_with("hold") {
            self.gate.acquire().await.unwrap().forget();
        }
        let failed = |message: String| Outcome::Failed {
            class: ErrorClass::Layout,
            message,
            metrics: JobMetrics::default(),
            evidence: None,
        };
        let Some(profile) = job.profile.as_deref() else {
            return failed("no profile".into());
        };
        let compiled = match lps_profiles::compiled::compile(profile) {
            Ok(compiled) => compiled,
            Err(e) => return failed(e.to_string()),
        };
        let snapshot =
            lps_profiles::extract::PageSnapshot::from_html(&compiled, "http://127.0.0.1/s", PAGE);
        let cards = lps_profiles::extract::extract_page(&compiled, &snapshot);
        let Some(card) = cards.chosen_source().and_then(|s| s.cards.first()).cloned() else {
            return failed("no card".into());
        };
        self.read.lock().unwrap().push((name.clone(), card.price));
        Outcome::Found {
            offers: vec![Offer {
                mall: job.mall.clone(),
                title: card.title.clone(),
                price: i64::try_from(card.price).unwrap(),
                shipping_fee: 0,
                url: card.link.clone(),
                seller: String::new(),
                match_score: 1.0,
                shipping: ShippingStatus::Free,
                list_price: 0,
                flags: Vec::new(),
            }],
            rounds: vec![RoundReport {
                kind: "original".into(),
                query: name,
                cards_seen: 1,
                matches: 1,
                elapsed_ms: 1,
                source: "dom".into(),
                excluded: Default::default(),
                pages: 1,
            }],
            metrics: JobMetrics::default(),
        }
    }
}

async fn enqueue(queue: &Queue, name: &str) -> i64 {
    let request = SearchRequest::new(
        vec![ProductSpec::new(None, name).unwrap()],
        vec![MallId::new(MALL).unwrap()],
        Priority::INTERACTIVE,
        None,
        None,
    )
    .unwrap();
    let accepted = queue
        .enqueue(&request, &EnqueueContext::default())
        .await
        .unwrap();
    accepted.items[0].job_id
}

/// Waits for `what` to hold, polling.
async fn eventually<F: Future<Output = bool>>(what: &str, mut check: impl FnMut() -> F) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not within 15s: {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn job_done(pool: &PgPool, job_id: i64) -> bool {
    sqlx::query_scalar::<_, String>("select state::text from job where job_id = $1")
        .bind(job_id)
        .fetch_one(pool)
        .await
        .unwrap()
        == "done"
}

/// The profile revision each of a job's leases ran with.
async fn revisions(pool: &PgPool, job_id: i64) -> Vec<String> {
    sqlx::query_scalar(
        "select revision from job_profile_revision where job_id = $1 order by lease_epoch",
    )
    .bind(job_id)
    .fetch_all(pool)
    .await
    .unwrap()
}

/// The price rule of the node's current alpha profile.
fn node_price_rule(node: &NodeHandle) -> String {
    let profiles = node.profiles().borrow().clone();
    let profile = profiles
        .get(&MallId::new(MALL).unwrap())
        .expect("alpha profile");
    format!("{:?}", profile.sources[0].fields.as_ref().unwrap().price)
}

fn revision_of(text: &str) -> String {
    revision(&[(format!("/any/{MALL}.toml"), text.to_owned())])
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn an_edited_profile_reaches_the_node_and_an_invalid_edit_is_refused(pool: PgPool) {
    let file = format!("{MALL}.toml");
    let v1 = alpha("div.product-price");
    let mut map = ConfigMap::new(&file, &v1);
    let running = common::start(
        &pool,
        &[
            "--profiles-dir",
            map.path(),
            "--profiles-poll",
            "100ms",
            "--malls",
            MALL,
        ],
    )
    .await;
    let ops = common::ops_snapshot(&running).await;
    let own = |ops: &lps_proto::pb::OpsSnapshot| ops.profile_sets.first().cloned().unwrap();
    assert_eq!(own(&ops).revision, revision_of(&v1));

    let reader = PageReader {
        gate: Arc::new(Semaphore::new(0)),
        started: Arc::new(Semaphore::new(0)),
        read: Arc::default(),
    };
    let (gate, started, read) = (
        reader.gate.clone(),
        reader.started.clone(),
        reader.read.clone(),
    );
    let mut config = NodeConfig::new(format!("http://{}", running.grpc_addr), NODE_TOKEN);
    config.node_id = "reload-1".into();
    config.slots = 2;
    let node = Node::new(config, reader);
    let handle = node.handle();
    let stop = CancellationToken::new();
    let node_task = tokio::spawn(node.run(stop.clone()));

    // A job starts with the first profile and is held running.
    let held = enqueue(&running.queue, "hold 테스트 상품").await;
    tokio::time::timeout(Duration::from_secs(15), started.acquire())
        .await
        .expect("the held job did not start")
        .unwrap()
        .forget();

    // The fix: the price is the sale price. It reaches the connected node, no restart.
    let v2 = alpha("div.sale-price");
    map.publish(&file, &v2);
    eventually("the node has the edited profile", || {
        let rule = node_price_rule(&handle);
        async move { rule.contains("div.sale-price") }
    })
    .await;
    let next = enqueue(&running.queue, "테스트 상품 500g").await;
    eventually("the next job is done", || job_done(&pool, next)).await;
    // The held job finishes on the profile it started with.
    gate.add_permits(1);
    eventually("the held job is done", || job_done(&pool, held)).await;
    {
        let read = read.lock().unwrap();
        assert!(
            read.contains(&("테스트 상품 500g".to_owned(), 9_900)),
            "the next job reads with the edit: {read:?}"
        );
        assert!(
            read.contains(&("hold 테스트 상품".to_owned(), 12_900)),
            "the running job keeps its profile: {read:?}"
        );
    }
    assert_eq!(revisions(&pool, held).await, [revision_of(&v1)]);
    assert_eq!(revisions(&pool, next).await, [revision_of(&v2)]);
    let ops = common::ops_snapshot(&running).await;
    assert_eq!(own(&ops).revision, revision_of(&v2));
    assert!(own(&ops).refused_error.is_empty());

    // An invalid edit: refused with the file and the field, the loaded profiles kept.
    let v3 = alpha("div.sale-price[[");
    map.publish(&file, &v3);
    eventually("the invalid edit is refused", || async {
        !own(&common::ops_snapshot(&running).await)
            .refused_error
            .is_empty()
    })
    .await;
    let ops = common::ops_snapshot(&running).await;
    assert_eq!(
        own(&ops).revision,
        revision_of(&v2),
        "the valid set is kept"
    );
    assert_eq!(own(&ops).refused_revision, revision_of(&v3));
    let refused = own(&ops).refused_error;
    assert!(
        refused.starts_with(&format!(
            "site profile {}/{file}: sources[0].fields.price",
            map.path()
        )),
        "{refused}"
    );
    let metrics = reqwest::get(format!("http://{}/metrics", running.http_addr))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for line in [
        "lps_profile_edit_refused 1",
        "lps_profile_reloads_total{outcome=\"applied\"} 1",
        "lps_profile_reloads_total{outcome=\"refused\"} 1",
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} in\n{metrics}");
    }
    let after = enqueue(&running.queue, "테스트 상품 500g 2개").await;
    eventually("the job after the refusal is done", || {
        job_done(&pool, after)
    })
    .await;
    assert!(
        read.lock()
            .unwrap()
            .contains(&("테스트 상품 500g 2개".to_owned(), 9_900)),
        "read with the kept profile"
    );
    assert_eq!(revisions(&pool, after).await, [revision_of(&v2)]);
    assert!(
        node_price_rule(&handle).contains("div.sale-price\""),
        "the node kept the valid profile"
    );

    stop.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(30), node_task).await;
    running.shutdown().await;
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn ops_shows_running_replicas_and_a_start_forgets_long_gone_ones(pool: PgPool) {
    use lps_coordinator::profiles::watch::{forget_gone_replicas, profile_sets, record_loaded};

    let revision = revision_of("format = 2");
    for replica in ["live", "quiet", "gone"] {
        record_loaded(&pool, replica, &revision).await.unwrap();
    }
    for (replica, ago) in [("quiet", "10 minutes"), ("gone", "2 hours")] {
        sqlx::query(
            "update profile_set set seen_at = now() - $2::interval where coordinator_id = $1",
        )
        .bind(replica)
        .bind(ago)
        .execute(&pool)
        .await
        .unwrap();
    }
    let shown: Vec<String> = profile_sets(&pool, None)
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.coordinator_id)
        .collect();
    assert_eq!(
        shown,
        ["live"],
        "a replica that stopped renewing is not shown"
    );
    assert_eq!(forget_gone_replicas(&pool).await.unwrap(), 1);
    let left: Vec<String> =
        sqlx::query_scalar("select coordinator_id from profile_set order by coordinator_id")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(left, ["live", "quiet"]);
}
