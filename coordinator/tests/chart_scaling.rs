//! The Helm chart's node autoscaling, run against the real schema (`#[sqlx::test]`: a
//! fresh, migrated database) instead of being read as text:
//!
//! - the KEDA ScaledObject's PostgreSQL query exactly as `helm template` renders it, with
//!   the proxy-port cap (`autoscaling.keda.capByProxyPorts`, the default) and without;
//! - the HPA's External metric as rendered (`lps_jobs{state="queued"}`), read from the
//!   coordinator's own Prometheus encoding of the ops snapshot (what `/metrics` serves),
//!   and the composite metric the chart README suggests for the same proxy cap;
//!
//! over one database seeded step by step through the queue's and the ledger's own
//! transitions (enqueue, claim, a retryable failure into backoff, a capped mall, a
//! disabled mall, leased proxy ports), asserting the replica count KEDA and the HPA derive
//! at each step. Replicas follow the HPA's AverageValue rule, `ceil(value / target)` within
//! the bounds; KEDA below its activation value holds `minReplicaCount` (0 = scaled to zero).
//!
//! A second database checks that KEDA counts only the queued jobs a claim could take now:
//! not those of a mall whose every port is cooling for it, not those handed back until a
//! later `not_before`, not those of a mall at its spend cap, none while the deployment is
//! at `coordinator.spendCapHourlyUsd` — each confirmed by a claim that takes nothing.
//!
//! helm comes from `HELM`, else `.tools/bin/helm` (`scripts/check-helm.sh` fetches it
//! there, and `scripts/test.sh` runs that first), else `PATH`. Without one the test fails:
//! it never skips.

use std::{path::PathBuf, process::Command, time::Duration};

use lps_coordinator::{
    db::MIGRATOR,
    ledger::{Acquired, Ledger, LedgerConfig, PortSet, Secret},
    metrics::Metrics,
    ops::Ops,
    queue::{EnqueueContext, MallLimits, Queue, QueueConfig},
};
use lps_proto::model::{
    ErrorClass, JobFailure, JobMetrics, MallId, Priority, ProductSpec, SearchRequest,
    SessionEndReason, SessionStats,
};
use sqlx::PgPool;

const PORTS: u16 = 4;
const MIN_REPLICAS: u32 = 0;
const MAX_REPLICAS: u32 = 4;

fn mall(id: &str) -> MallId {
    MallId::new(id).unwrap()
}

// ------------------------------------------------------------------------------ the chart

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn helm() -> PathBuf {
    if let Some(h) = std::env::var_os("HELM") {
        return h.into();
    }
    let tools = repo().join(".tools/bin/helm");
    if tools.exists() {
        return tools;
    }
    let on_path = Command::new("helm").arg("version").output();
    assert!(
        on_path.is_ok_and(|o| o.status.success()),
        "no helm: set HELM, or run scripts/check-helm.sh (it puts one in .tools/bin)"
    );
    "helm".into()
}

/// `templates/autoscaling.yaml` rendered with the default values plus `sets`.
fn render(sets: &[&str]) -> String {
    let mut cmd = Command::new(helm());
    cmd.args(["template", "lps"])
        .arg(repo().join("helm/lps"))
        .args(["--show-only", "templates/autoscaling.yaml"]);
    for s in sets {
        // `json:key=value` is a typed value (a number the schema wants as one).
        match s.strip_prefix("json:") {
            Some(json) => cmd.args(["--set-json", json]),
            None => cmd.args(["--set", s]),
        };
    }
    let out = cmd.output().expect("cannot run helm");
    assert!(
        out.status.success(),
        "helm template failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The value of the first `key: value` line (quotes removed).
fn scalar(yaml: &str, key: &str) -> String {
    let prefix = format!("{key}:");
    yaml.lines()
        .map(str::trim)
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {key} in:\n{yaml}"))
        .trim()
        .trim_matches('"')
        .to_owned()
}

/// What follows the first line reading `anchor` (trimmed).
fn after<'a>(yaml: &'a str, anchor: &str) -> &'a str {
    let at = yaml
        .lines()
        .find(|l| l.trim() == anchor)
        .unwrap_or_else(|| panic!("no {anchor} in:\n{yaml}"));
    let start = at.as_ptr() as usize - yaml.as_ptr() as usize + at.len();
    &yaml[start..]
}

/// The text of the block scalar `key: |-` (its lines, de-indented).
fn block(yaml: &str, key: &str) -> String {
    let mut lines = yaml
        .lines()
        .skip_while(|l| l.trim() != format!("{key}: |-"));
    let head = lines
        .next()
        .unwrap_or_else(|| panic!("no {key}: |- in:\n{yaml}"));
    let outer = head.len() - head.trim_start().len();
    let body: Vec<&str> = lines
        .take_while(|l| l.trim().is_empty() || l.len() - l.trim_start().len() > outer)
        .collect();
    let indent = body
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap();
    body.iter()
        .map(|l| l.get(indent..).unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A rendered ScaledObject: its query and the numbers KEDA scales by.
struct Keda {
    query: String,
    target: f64,
    activation: f64,
    min: u32,
    max: u32,
}

impl Keda {
    fn render(cap_by_ports: bool) -> Keda {
        Keda::render_with(cap_by_ports, &[])
    }

    /// The ScaledObject rendered with `sets` besides the test's bounds.
    fn render_with(cap_by_ports: bool, sets: &[&str]) -> Keda {
        let cap = format!("autoscaling.keda.capByProxyPorts={cap_by_ports}");
        let min = format!("autoscaling.minReplicas={MIN_REPLICAS}");
        let max = format!("autoscaling.maxReplicas={MAX_REPLICAS}");
        let mut all = vec!["autoscaling.mode=keda", &cap, &min, &max];
        all.extend_from_slice(sets);
        let yaml = render(&all);
        assert_eq!(scalar(after(&yaml, "triggers:"), "- type"), "postgresql");
        Keda {
            query: block(&yaml, "query"),
            target: scalar(&yaml, "targetQueryValue").parse().unwrap(),
            activation: scalar(&yaml, "activationTargetQueryValue").parse().unwrap(),
            min: scalar(&yaml, "minReplicaCount").parse().unwrap(),
            max: scalar(&yaml, "maxReplicaCount").parse().unwrap(),
        }
    }

    async fn slots_wanted(&self, pool: &PgPool) -> f64 {
        sqlx::query_scalar::<_, f64>(sqlx::AssertSqlSafe(self.query.clone()))
            .fetch_one(pool)
            .await
            .unwrap_or_else(|e| panic!("the ScaledObject's query fails: {e}\n{}", self.query))
    }

    /// KEDA: inactive at or below the activation value (minReplicaCount, 0 = none);
    /// active, its HPA's AverageValue rule with at least one replica.
    fn replicas(&self, value: f64) -> u32 {
        if value <= self.activation {
            return self.min;
        }
        average_value_replicas(value, self.target, self.min.max(1), self.max)
    }
}

/// The rendered HPA: the External metric it reads and the numbers it scales by.
struct Hpa {
    metric: String,
    state: String,
    target: f64,
    min: u32,
    max: u32,
}

impl Hpa {
    fn render() -> Hpa {
        let max = format!("autoscaling.maxReplicas={MAX_REPLICAS}");
        let yaml = render(&["autoscaling.mode=hpa", "autoscaling.minReplicas=1", &max]);
        let metrics = after(&yaml, "metrics:");
        assert_eq!(scalar(metrics, "- type"), "External");
        Hpa {
            metric: scalar(after(metrics, "metric:"), "name"),
            state: scalar(after(metrics, "matchLabels:"), "state"),
            target: scalar(&yaml, "averageValue").parse().unwrap(),
            min: scalar(&yaml, "minReplicas").parse().unwrap(),
            max: scalar(&yaml, "maxReplicas").parse().unwrap(),
        }
    }

    fn replicas(&self, value: f64) -> u32 {
        average_value_replicas(value, self.target, self.min, self.max)
    }
}

fn average_value_replicas(value: f64, target: f64, min: u32, max: u32) -> u32 {
    let wanted = (value / target).ceil();
    (wanted as u32).clamp(min, max)
}

// ------------------------------------------------------------------------------ the metrics

/// The coordinator's Prometheus text for the database's current ops snapshot: what its
/// `/metrics` serves once the snapshot loop ran.
async fn scrape(queue: &Queue) -> String {
    let ops = Ops::new(queue.clone()).snapshot().await.unwrap();
    let metrics = Metrics::new();
    lps_coordinator::alerts::publish(&metrics, &ops);
    metrics.encode()
}

/// The value of one series, e.g. `lps_jobs{state="queued"}`; panics when it is absent.
fn series(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no series {name} in /metrics:\n{text}"))
        .trim()
        .parse()
        .unwrap()
}

// ------------------------------------------------------------------------------ seeding

async fn enqueue(queue: &Queue, mall_id: &str, prefix: &str, n: usize) {
    let products = (0..n)
        .map(|i| ProductSpec::new(None, &format!("{prefix} {i}")).unwrap())
        .collect();
    let req =
        SearchRequest::new(products, vec![mall(mall_id)], Priority::BATCH, None, None).unwrap();
    queue
        .enqueue(&req, &EnqueueContext::default())
        .await
        .unwrap();
}

struct Expect {
    keda_capped: (f64, u32),
    keda_uncapped: (f64, u32),
    hpa_queued: (f64, u32),
    composite: (f64, u32),
}

async fn assert_scaling(pool: &PgPool, queue: &Queue, step: &str, want: Expect) {
    let capped = Keda::render(true);
    let uncapped = Keda::render(false);
    let hpa = Hpa::render();
    let text = scrape(queue).await;
    let queued = series(&text, &format!("{}{{state=\"{}\"}}", hpa.metric, hpa.state));
    // The README's composite metric for an HPA with the proxy cap:
    // max(lps_jobs{state="running"}) + clamp_max(max(lps_jobs{state="queued"}), scalar(max(lps_proxy_ports_available)))
    let composite = series(&text, "lps_jobs{state=\"running\"}")
        + queued.min(series(&text, "lps_proxy_ports_available"));
    let got = Expect {
        keda_capped: {
            let v = capped.slots_wanted(pool).await;
            (v, capped.replicas(v))
        },
        keda_uncapped: {
            let v = uncapped.slots_wanted(pool).await;
            (v, uncapped.replicas(v))
        },
        hpa_queued: (queued, hpa.replicas(queued)),
        composite: (composite, hpa.replicas(composite)),
    };
    for (what, got, want) in [
        ("KEDA (proxy cap)", got.keda_capped, want.keda_capped),
        ("KEDA (no proxy cap)", got.keda_uncapped, want.keda_uncapped),
        (
            "HPA lps_jobs{state=\"queued\"}",
            got.hpa_queued,
            want.hpa_queued,
        ),
        ("HPA composite metric", got.composite, want.composite),
    ] {
        assert_eq!(
            got, want,
            "{step}: {what}: (value, replicas) is {got:?}, want {want:?}"
        );
    }
}

// ------------------------------------------------------------------------------ the test

#[sqlx::test(migrator = "MIGRATOR")]
async fn the_charts_autoscalers_ask_for_the_replicas_the_queue_and_the_ports_need(pool: PgPool) {
    let config = QueueConfig {
        // A retried job waits far longer than this test runs.
        backoff_base: Duration::from_secs(600),
        backoff_cap: Duration::from_secs(600),
        ..QueueConfig::default()
    };
    let queue = Queue::new(pool.clone(), config);
    queue
        .upsert_mall(&MallLimits::unlimited(mall("alpha")))
        .await
        .unwrap();
    let ledger = Ledger::new(
        pool.clone(),
        LedgerConfig::new(
            "gw.test",
            PortSet::from_ports(1..=PORTS),
            "lps-user",
            Secret::new("gateway-password-scaling"),
        ),
    );
    ledger.reconcile().await.unwrap();

    // Slots per node: 2 (the chart's default crawlerNode.slots, the divisor of both).
    assert_scaling(
        &pool,
        &queue,
        "empty queue",
        Expect {
            keda_capped: (0.0, 0),
            keda_uncapped: (0.0, 0),
            hpa_queued: (0.0, 1),
            composite: (0.0, 1),
        },
    )
    .await;

    enqueue(&queue, "alpha", "queued", 5).await;
    assert_scaling(
        &pool,
        &queue,
        "5 queued, 4 ports free",
        Expect {
            keda_capped: (4.0, 2),
            // the claim takes no more than the 4 ports not cooling, capped or not
            keda_uncapped: (4.0, 2),
            hpa_queued: (5.0, 3),
            composite: (4.0, 2),
        },
    )
    .await;

    // A node runs two of them, each on a leased port.
    let running = queue.claim("node-1", None, 2).await.unwrap();
    assert_eq!(running.len(), 2);
    for job in &running {
        let got = ledger
            .acquire("node-1", &mall("alpha"), Some(job.lease.job_id))
            .await
            .unwrap();
        assert!(matches!(got, Acquired::Grant(_)), "{got:?}");
    }
    assert_scaling(
        &pool,
        &queue,
        "2 running on 2 ports, 3 queued, 2 ports free",
        Expect {
            keda_capped: (4.0, 2),
            keda_uncapped: (4.0, 2),
            hpa_queued: (3.0, 2),
            composite: (4.0, 2),
        },
    )
    .await;

    // One fails and waits out its backoff (queued, not startable); a mall capped at one
    // running job gets six (one startable).
    let failure = JobFailure::new(running[0].lease, ErrorClass::Network, "reset");
    queue.fail_if_leased("node-1", &failure).await.unwrap();
    let capped = MallLimits {
        max_running: Some(1),
        ..MallLimits::unlimited(mall("beta"))
    };
    queue.upsert_mall(&capped).await.unwrap();
    enqueue(&queue, "beta", "capped", 6).await;
    assert_scaling(
        &pool,
        &queue,
        "1 running, backoff 1, alpha 3, beta 6 (cap 1)",
        Expect {
            // 1 running + min(3 + 1 startable, 2 ports free)
            keda_capped: (3.0, 2),
            // 1 running + min(3 + 1 startable, 4 ports not cooling - 1 running)
            keda_uncapped: (4.0, 2),
            // every queued job counts for the plain HPA, past its max
            hpa_queued: (10.0, MAX_REPLICAS),
            composite: (3.0, 2),
        },
    )
    .await;

    // The capped mall is disabled: its jobs stay queued but cannot start.
    let disabled = MallLimits {
        enabled: false,
        ..capped
    };
    queue.upsert_mall(&disabled).await.unwrap();
    assert_scaling(
        &pool,
        &queue,
        "beta disabled",
        Expect {
            keda_capped: (3.0, 2),
            keda_uncapped: (4.0, 2),
            hpa_queued: (10.0, MAX_REPLICAS),
            composite: (3.0, 2),
        },
    )
    .await;
}

/// KEDA's slots wanted and replicas, with the proxy cap and without, for `sets`.
async fn keda_both(pool: &PgPool, sets: &[&str]) -> [(f64, u32); 2] {
    let mut got = [(0.0, 0); 2];
    for (i, cap_by_ports) in [true, false].into_iter().enumerate() {
        let keda = Keda::render_with(cap_by_ports, sets);
        let v = keda.slots_wanted(pool).await;
        got[i] = (v, keda.replicas(v));
    }
    got
}

/// Asserts that a claim by a node of every mall now takes nothing: the jobs KEDA left out
/// are the ones the claim cannot take.
async fn claim_takes_nothing(queue: &Queue, step: &str) {
    let took = queue.claim("probe", None, 8).await.unwrap();
    assert!(took.is_empty(), "{step}: a claim took {took:?}");
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn keda_counts_only_the_jobs_a_claim_could_take_now(pool: PgPool) {
    let config = QueueConfig {
        backoff_base: Duration::from_secs(600),
        backoff_cap: Duration::from_secs(600),
        ..QueueConfig::default()
    };
    let queue = Queue::new(pool.clone(), config);
    for id in ["alpha", "beta", "delta"] {
        queue
            .upsert_mall(&MallLimits::unlimited(mall(id)))
            .await
            .unwrap();
    }
    let gamma = MallLimits {
        spend_cap_hourly_usd: Some(0.5),
        ..MallLimits::unlimited(mall("gamma"))
    };
    queue.upsert_mall(&gamma).await.unwrap();
    let ledger = Ledger::new(
        pool.clone(),
        LedgerConfig::new(
            "gw.test",
            PortSet::from_ports(1..=PORTS),
            "lps-user",
            Secret::new("gateway-password-scaling"),
        ),
    )
    .with_jitter(1.0);
    ledger.reconcile().await.unwrap();

    // Beta blocked every port: each cools for beta (and only for beta).
    for _ in 0..PORTS {
        let Acquired::Grant(grant) = ledger.acquire("node-1", &mall("beta"), None).await.unwrap()
        else {
            panic!("a port for beta");
        };
        let stats = SessionStats::new(mall("beta"), 1, 0, 1, Duration::from_secs(1), None).unwrap();
        ledger
            .release(
                "node-1",
                grant.port,
                Some(grant.lease_id),
                SessionEndReason::Block,
                &stats,
            )
            .await
            .unwrap();
    }
    enqueue(&queue, "beta", "cooling", 3).await;
    assert_eq!(
        keda_both(&pool, &[]).await,
        [(0.0, 0); 2],
        "beta's ports are all cooling for it: its 3 jobs cannot start"
    );
    claim_takes_nothing(&queue, "beta cooling").await;

    // Alpha's one job is claimed and handed back until a port is expected, 4 minutes on.
    enqueue(&queue, "alpha", "handed back", 1).await;
    assert_eq!(
        keda_both(&pool, &[]).await,
        [(1.0, 1); 2],
        "alpha's job can start"
    );
    let running = queue.claim("node-1", None, 1).await.unwrap();
    assert_eq!(running.len(), 1);
    let later = chrono::Utc::now() + chrono::TimeDelta::minutes(4);
    queue
        .hand_back_until("node-1", running[0].lease, Some(later))
        .await
        .unwrap();
    assert_eq!(
        keda_both(&pool, &[]).await,
        [(0.0, 0); 2],
        "a job handed back until not_before waits for it"
    );
    claim_takes_nothing(&queue, "alpha not before").await;

    // Gamma's attempt cost $1, past its own cap of $0.50: its other job waits for the hour.
    enqueue(&queue, "gamma", "spent", 2).await;
    let running = queue.claim("node-1", None, 1).await.unwrap();
    assert_eq!(running.len(), 1);
    let lease = running[0].lease;
    let failure = JobFailure::new(lease, ErrorClass::Network, "reset");
    queue.fail_if_leased("node-1", &failure).await.unwrap();
    let metrics = JobMetrics {
        bytes_in: 1_000_000,
        cost_usd: 1.0,
        ..JobMetrics::default()
    };
    let spent = queue.record_spend("node-1", lease, &metrics).await.unwrap();
    assert!(spent.matched, "the spend is on gamma's attempt");
    assert_eq!(
        keda_both(&pool, &[]).await,
        [(0.0, 0); 2],
        "gamma is at its spend cap"
    );
    claim_takes_nothing(&queue, "gamma capped").await;

    // Delta can start, unless the deployment's own cap ($1 an hour) is reached: it is.
    enqueue(&queue, "delta", "deployment", 1).await;
    assert_eq!(
        keda_both(&pool, &[]).await,
        [(1.0, 1); 2],
        "no deployment cap"
    );
    let capped = ["json:coordinator.spendCapHourlyUsd=1"];
    assert_eq!(
        keda_both(&pool, &capped).await,
        [(0.0, 0); 2],
        "the deployment spent its $1 of the hour"
    );
    let roomy = ["json:coordinator.spendCapHourlyUsd=5"];
    assert_eq!(
        keda_both(&pool, &roomy).await,
        [(1.0, 1); 2],
        "under a $5 cap delta can start"
    );
    let under_cap = Queue::new(
        pool.clone(),
        QueueConfig {
            spend_cap_hourly_usd: Some(1.0),
            ..QueueConfig::default()
        },
    );
    claim_takes_nothing(&under_cap, "deployment capped").await;
}
