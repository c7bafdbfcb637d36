//! Schedules on real coordinators over real gRPC and PostgreSQL: a 2 s schedule runs three
//! times across two replicas, each run once and never before the previous one is final; a
//! price drop fires exactly one price-move event to a loopback webhook receiver, signed;
//! bad input is INVALID_ARGUMENT naming the field and stores nothing; a client sees and
//! changes only its own schedules; pause stops runs, resume restarts them, delete ends them;
//! the list pages newest first.
//!
//! Jobs are finished here through the queue's own transitions (claimed by a node id and
//! completed, as a crawler node's reports are); `e2e_browser.rs` runs a schedule against a
//! real node, Chromium and the test mall.

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{Router, body::Bytes, extract::State, http::HeaderMap, routing::post};
use common::{CLIENT_TOKEN, with_token};
use lps_coordinator::{
    app::Running,
    delivery::signature::{self, DEFAULT_TOLERANCE},
    queue::{MallLimits, Queue},
};
use lps_proto::{
    model::{JobResult, MallId, Offer, ShippingStatus},
    pb::{self, schedule_service_client::ScheduleServiceClient},
};
use sqlx::{
    PgPool,
    postgres::{PgConnectOptions, PgPoolOptions},
};
use tonic::{Code, transport::Channel};
use tonic_types::StatusExt as _;

mod common;

const MALL: &str = "testmall-alpha";
const NODE: &str = "node-schedule-tests";
const OTHER_TOKEN: &str = "other-client-token-0001";
const ADMIN: &str = "ops-admin-token-00001";
const SECRET: &str = "secret-of-watch-0123456789";

/// A webhook receiver on 127.0.0.1 (`POST /watch`) that records every request and answers
/// 200.
#[derive(Debug, Clone, Default)]
struct Receiver {
    got: Arc<Mutex<Vec<(HeaderMap, String)>>>,
}

impl Receiver {
    async fn start() -> (SocketAddr, Self) {
        let receiver = Self::default();
        let app = Router::new()
            .route(
                "/watch",
                post(
                    |State(r): State<Self>, headers: HeaderMap, body: Bytes| async move {
                        let body = String::from_utf8(body.to_vec()).unwrap();
                        r.got.lock().unwrap().push((headers, body));
                        "ok"
                    },
                ),
            )
            .with_state(receiver.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (addr, receiver)
    }

    fn got(&self) -> Vec<(HeaderMap, String)> {
        self.got.lock().unwrap().clone()
    }
}

/// A coordinator on its own pool of the test database: destination `watch` is the
/// receiver's `/watch` (`None`: a loopback address nobody listens on), a fast scheduler
/// and a 1 s minimum interval, `extra` on top.
async fn coordinator(
    opts: &PgConnectOptions,
    receiver: Option<SocketAddr>,
    extra: &[&str],
) -> Running {
    let pool = PgPoolOptions::new()
        .max_connections(10)
        .connect_with(opts.clone())
        .await
        .unwrap();
    let url = match receiver {
        Some(addr) => format!("watch=http://{addr}/watch"),
        None => "watch=http://127.0.0.1:9/watch".to_owned(),
    };
    let secrets = format!("watch={SECRET}");
    let mut args = vec![
        "--client-tokens",
        "other=other-client-token-0001",
        "--admin-tokens",
        "ops=ops-admin-token-00001",
        "--destinations",
        &url,
        "--destination-secrets",
        &secrets,
        "--delivery-poll",
        "50ms",
    ];
    for (flag, value) in [
        ("--schedule-poll", "100ms"),
        ("--schedule-min-interval", "1s"),
    ] {
        if !extra.contains(&flag) {
            args.extend([flag, value]);
        }
    }
    args.extend_from_slice(extra);
    let running = common::start_on(pool, &args).await;
    running
        .queue
        .upsert_mall(&MallLimits::unlimited(MallId::new(MALL).unwrap()))
        .await
        .unwrap();
    running
}

async fn client(running: &Running) -> ScheduleServiceClient<Channel> {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", running.grpc_addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    ScheduleServiceClient::new(channel)
}

fn every(seconds: i64) -> Option<prost_types::Duration> {
    Some(prost_types::Duration { seconds, nanos: 0 })
}

fn schedule_req(interval_s: i64) -> pb::CreateScheduleRequest {
    pb::CreateScheduleRequest {
        products: vec![pb::Product {
            code: String::new(),
            name: "제주 삼다수 2L x 12".into(),
            ..Default::default()
        }],
        malls: vec![MALL.into()],
        interval: every(interval_s),
        ..Default::default()
    }
}

async fn create(
    client: &mut ScheduleServiceClient<Channel>,
    req: pb::CreateScheduleRequest,
    token: &str,
) -> pb::Schedule {
    client
        .create_schedule(with_token(req, token))
        .await
        .unwrap()
        .into_inner()
        .schedule
        .unwrap()
}

async fn get(
    client: &mut ScheduleServiceClient<Channel>,
    schedule_id: i64,
    token: &str,
) -> Result<pb::Schedule, tonic::Status> {
    client
        .get_schedule(with_token(pb::GetScheduleRequest { schedule_id }, token))
        .await
        .map(tonic::Response::into_inner)
}

/// An offer of the test mall at `price` with free shipping.
fn offer(price: i64) -> Offer {
    Offer {
        mall: MallId::new(MALL).unwrap(),
        title: "제주 삼다수 2L 12병".into(),
        price,
        shipping_fee: 0,
        url: format!("http://mall.test/p/{price}"),
        seller: "test seller".into(),
        match_score: 1.0,
        shipping: ShippingStatus::Free,
        list_price: 0,
        flags: Vec::new(),
    }
}

/// A node that finishes every job it claims after `hold`, found at the price `price`
/// says for the job's run (1 for the run that made the first search it sees, …), until
/// dropped.
struct Finisher {
    task: tokio::task::JoinHandle<()>,
}

impl Finisher {
    fn start(queue: Queue, hold: Duration, price: impl Fn(usize) -> i64 + Send + 'static) -> Self {
        let task = tokio::spawn(async move {
            let mut runs = 0;
            loop {
                let claimed = queue.claim(NODE, None, 50).await.unwrap();
                if claimed.is_empty() {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
                tokio::time::sleep(hold).await;
                runs += 1;
                for job in claimed {
                    let result = JobResult::found(job.lease, vec![offer(price(runs))]).unwrap();
                    queue.complete_if_leased(NODE, &result).await.unwrap();
                }
            }
        });
        Self { task }
    }
}

impl Drop for Finisher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Polls GetSchedule until `done` says so; panics after `within`.
async fn wait_schedule(
    client: &mut ScheduleServiceClient<Channel>,
    schedule_id: i64,
    within: Duration,
    done: impl Fn(&pb::Schedule) -> bool,
) -> pb::Schedule {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let s = get(client, schedule_id, CLIENT_TOKEN).await.unwrap();
        if done(&s) {
            return s;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "schedule {schedule_id} not there within {within:?}: {s:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Whether run `run` of `schedule_id` was evaluated.
async fn evaluated(pool: &PgPool, schedule_id: i64) -> i32 {
    sqlx::query_scalar("select evaluated_run from schedule where schedule_id = $1")
        .bind(schedule_id)
        .fetch_one(pool)
        .await
        .unwrap()
}

#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn a_two_second_schedule_runs_three_times_without_overlap_across_two_replicas(
    pool_opts: PgPoolOptions,
    opts: PgConnectOptions,
) {
    let pool = pool_opts.connect_with(opts.clone()).await.unwrap();
    let a = coordinator(&opts, None, &["--coordinator-id", "replica-a"]).await;
    let b = coordinator(&opts, None, &["--coordinator-id", "replica-b"]).await;
    let mut ca = client(&a).await;
    // NB: each run's job takes longer than the interval, so a scheduler that started runs
    // by the clock alone would overlap them.
    let _node = Finisher::start(a.queue.clone(), Duration::from_millis(2500), |_| 10_000);
    let created = create(&mut ca, schedule_req(2), CLIENT_TOKEN).await;
    let id = created.schedule_id;
    assert_eq!(created.priority, 50, "batch by default");
    assert!(!created.paused);

    let mut cb = client(&b).await;
    wait_schedule(&mut cb, id, Duration::from_secs(30), |s| s.runs >= 3).await;
    while evaluated(&pool, id).await < 3 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    cb.pause_schedule(with_token(
        pb::PauseScheduleRequest { schedule_id: id },
        CLIENT_TOKEN,
    ))
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;

    // Each run once, under its own key, as a search of the schedule's client; each started
    // only after every job of the previous one had finished.
    type Run = (
        String,
        String,
        Option<String>,
        chrono::DateTime<chrono::Utc>,
        Option<chrono::DateTime<chrono::Utc>>,
    );
    let runs: Vec<Run> = sqlx::query_as(
        "select r.idempotency_key, r.client, r.caller, r.created_at,
                    (select max(j.finished_at) from search_item si join job j using (job_id)
                     where si.search_id = r.search_id)
             from search_request r
             where r.idempotency_key like $1
             order by r.search_id",
    )
    .bind(format!("schedule-{id}-run-%"))
    .fetch_all(&pool)
    .await
    .unwrap();
    let keys: Vec<&str> = runs.iter().map(|r| r.0.as_str()).collect();
    assert!(keys.len() >= 3, "{keys:?}");
    for (n, key) in keys.iter().enumerate() {
        assert_eq!(*key, format!("schedule-{id}-run-{}", n + 1), "{keys:?}");
    }
    for (_, client, caller, _, _) in &runs {
        assert_eq!(client, common::CLIENT_NAME);
        assert_eq!(caller.as_deref(), Some(format!("schedule-{id}").as_str()));
    }
    for pair in runs.windows(2) {
        let (prev_finished, next_created) = (pair[0].4, pair[1].3);
        let prev_finished = prev_finished
            .unwrap_or_else(|| panic!("{} started before {} finished", pair[1].0, pair[0].0));
        assert!(
            next_created >= prev_finished,
            "{} started at {next_created} before {} finished at {prev_finished}",
            pair[1].0,
            pair[0].0
        );
    }
    // Three runs of jobs taking 2.5 s each: no second job ever ran beside one.
    let jobs: i64 = sqlx::query_scalar(
        "select count(*) from job j join search_item si using (job_id)
         join search_request r using (search_id) where r.idempotency_key like $1",
    )
    .bind(format!("schedule-{id}-run-%"))
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(
        jobs,
        keys.len() as i64,
        "one job per run, none joined or repeated"
    );

    // Both replicas count what they started, and the counts add up to the runs.
    let mut started = 0.0;
    for r in [&a, &b] {
        let text = reqwest::get(format!("http://{}/metrics", r.http_addr))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let line = text
            .lines()
            .find(|l| l.starts_with("lps_schedule_runs_total{outcome=\"started\"}"))
            .expect("lps_schedule_runs_total{outcome=\"started\"} is exported");
        started += line.rsplit(' ').next().unwrap().parse::<f64>().unwrap();
        assert!(
            text.contains("lps_price_moves_total{reason=\"below_target\"} 0"),
            "{text}"
        );
    }
    assert_eq!(started, keys.len() as f64);
    a.shutdown().await;
    b.shutdown().await;
}

#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn a_price_drop_fires_exactly_one_price_move(
    pool_opts: PgPoolOptions,
    opts: PgConnectOptions,
) {
    let pool = pool_opts.connect_with(opts.clone()).await.unwrap();
    let (addr, receiver) = Receiver::start().await;
    let running = coordinator(&opts, Some(addr), &[]).await;
    let mut c = client(&running).await;
    // Run 1 sees 12,000; the price drops to 9,000 for run 2 and stays below after.
    let _node = Finisher::start(running.queue.clone(), Duration::ZERO, |run| match run {
        1 => 12_000,
        2 => 9_000,
        _ => 8_900,
    });
    let mut req = schedule_req(1);
    req.destinations = vec!["watch".into()];
    req.rules = vec![
        pb::PriceMoveRule {
            below: Some(10_000),
            ..Default::default()
        },
        pb::PriceMoveRule {
            move_percent: Some(20.0),
            ..Default::default()
        },
    ];
    let id = create(&mut c, req, CLIENT_TOKEN).await.schedule_id;
    wait_schedule(&mut c, id, Duration::from_secs(30), |s| s.runs >= 4).await;
    while evaluated(&pool, id).await < 4 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    c.pause_schedule(with_token(
        pb::PauseScheduleRequest { schedule_id: id },
        CLIENT_TOKEN,
    ))
    .await
    .unwrap();
    // Every stored event delivered, then: one event, of run 2.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let pending: i64 =
            sqlx::query_scalar("select count(*) from delivery where state <> 'delivered'")
                .fetch_one(&pool)
                .await
                .unwrap();
        if pending == 0 && !receiver.got().is_empty() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{pending} undelivered"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let got = receiver.got();
    assert_eq!(got.len(), 1, "exactly one price-move event: {got:#?}");
    let (headers, body) = &got[0];
    let header = |name: &str| headers.get(name).unwrap().to_str().unwrap().to_owned();
    signature::verify(
        SECRET.as_bytes(),
        &header(signature::SIGNATURE_HEADER),
        body.as_bytes(),
        chrono::Utc::now().timestamp(),
        DEFAULT_TOLERANCE,
    )
    .unwrap();
    let event: pb::DeliveryEvent =
        lps_proto::json::from_json(body, "lps.v1.DeliveryEvent").unwrap();
    assert_eq!(header(signature::EVENT_ID_HEADER), event.event_id);
    assert_eq!(event.kind, pb::DeliveryEventKind::PriceMove as i32);
    assert_eq!(event.destination, "watch");
    let m = event.price_move.unwrap();
    assert_eq!(m.schedule_id, id);
    assert_eq!(m.run, 2);
    assert_eq!(m.product_index, 0);
    assert_eq!(m.product.unwrap().name, "제주 삼다수 2L x 12");
    assert_eq!(m.lowest_effective_price, 9_000);
    assert_eq!(m.previous_effective_price, Some(12_000));
    assert_eq!(m.change_percent, Some(-25.0));
    assert_eq!(
        m.reasons,
        vec![
            pb::PriceMoveReason::BelowTarget as i32,
            pb::PriceMoveReason::Moved as i32
        ]
    );
    assert_eq!(m.target, Some(10_000));
    assert_eq!(m.offers.len(), 1);
    assert_eq!(m.offers[0].price, 9_000);
    assert_eq!(m.currency, "KRW");
    // The run's search shows the event among its deliveries, kind PRICE_MOVE.
    let search_id = event.search_id;
    let mut searches = lps_proto::pb::search_service_client::SearchServiceClient::new(
        tonic::transport::Endpoint::from_shared(format!("http://{}", running.grpc_addr))
            .unwrap()
            .connect()
            .await
            .unwrap(),
    );
    let status = searches
        .get_search(with_token(pb::GetSearchRequest { search_id }, CLIENT_TOKEN))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status.deliveries.len(), 1);
    assert_eq!(
        status.deliveries[0].kind,
        pb::DeliveryEventKind::PriceMove as i32
    );
    assert_eq!(status.deliveries[0].schedule_id, id);
    // The observation the next run compares with is the newest price.
    let (price, run): (i64, i32) = sqlx::query_as(
        "select lowest_effective_price, run_number from schedule_observation where schedule_id = $1",
    )
    .bind(id)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!((price, run), (8_900, 4));
    // Each run's price-history entry names the schedule and its run's search.
    let entries: Vec<(Option<i64>, Option<i64>, String)> = sqlx::query_as(
        "select h.schedule_id, h.search_id, h.client from price_history h order by h.observed_at",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert!(entries.len() >= 4, "{entries:?}");
    assert!(
        entries
            .iter()
            .all(|(schedule, search, client)| *schedule == Some(id)
                && search.is_some()
                && client == common::CLIENT_NAME),
        "{entries:?}"
    );
    let text = reqwest::get(format!("http://{}/metrics", running.http_addr))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        text.contains("lps_price_moves_total{reason=\"below_target\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("lps_price_moves_total{reason=\"moved\"} 1"),
        "{text}"
    );
    running.shutdown().await;
}

#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn evaluating_a_run_again_enqueues_nothing_more(pool: PgPool) {
    // The evaluation itself, twice and at once: one event, whoever commits first. No
    // coordinator runs here, so no scheduler but the test's own starts or evaluates.
    let queue = Queue::new(pool.clone(), lps_coordinator::queue::QueueConfig::default());
    queue
        .upsert_mall(&MallLimits::unlimited(MallId::new(MALL).unwrap()))
        .await
        .unwrap();
    let mut req = schedule_req(3600);
    req.destinations = vec!["watch".into()];
    req.rules = vec![pb::PriceMoveRule {
        below: Some(10_000),
        ..Default::default()
    }];
    let spec = lps_proto::model::ScheduleSpec::try_from(req).unwrap();
    let schedules = lps_coordinator::schedule::Schedules::new(queue.clone());
    let (schedule, _) = schedules
        .create(&spec, common::CLIENT_NAME, Duration::from_secs(1))
        .await
        .unwrap();
    let id = schedule.schedule_id;
    let scheduler = lps_coordinator::schedule::Scheduler::new(
        schedules.clone(),
        lps_coordinator::schedule::ScheduleConfig {
            poll: Duration::from_secs(3600),
            claim_ttl: Duration::from_secs(30),
            min_interval: Duration::from_secs(1),
        },
        Arc::new(lps_coordinator::metrics::Metrics::new()),
        "test-scheduler",
    );
    scheduler.pass().await;
    let claimed = queue.claim(NODE, None, 10).await.unwrap();
    assert_eq!(claimed.len(), 1, "the first run's job");
    let result = JobResult::found(claimed[0].lease, vec![offer(9_000)]).unwrap();
    queue.complete_if_leased(NODE, &result).await.unwrap();
    let runs = schedules.unevaluated(10).await.unwrap();
    assert_eq!(runs.len(), 1);
    let (first, second) = tokio::join!(schedules.evaluate(runs[0]), schedules.evaluate(runs[0]));
    let (first, second) = (first.unwrap(), second.unwrap());
    assert!(
        first.evaluated != second.evaluated,
        "one of them evaluated: {first:?} {second:?}"
    );
    assert_eq!(first.events + second.events, 1);
    let again = schedules.evaluate(runs[0]).await.unwrap();
    assert!(!again.evaluated);
    let events: i64 = sqlx::query_scalar("select count(*) from delivery where schedule_id = $1")
        .bind(id)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(events, 1);
    assert!(schedules.unevaluated(10).await.unwrap().is_empty());
}

#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn bad_input_is_invalid_argument_naming_the_field(pool: PgPool) {
    let running = coordinator(
        &pool.connect_options(),
        None,
        &["--schedule-min-interval", "10s"],
    )
    .await;
    let mut c = client(&running).await;
    let base = || {
        let mut r = schedule_req(60);
        r.destinations = vec!["watch".into()];
        r.rules = vec![pb::PriceMoveRule {
            below: Some(10_000),
            move_percent: Some(5.0),
            ..Default::default()
        }];
        r
    };
    type Edit = fn(&mut pb::CreateScheduleRequest);
    let cases: [(Edit, &str); 11] = [
        (|r| r.products.clear(), "products"),
        (
            |r| r.products[0].gtin = "8801234567894".into(),
            "products[0].gtin",
        ),
        (|r| r.malls = vec!["no-such-mall".into()], "malls[0]"),
        (|r| r.interval = every(5), "interval"),
        (
            |r| {
                r.interval = None;
                r.cron = "every now and then".into();
            },
            "cron",
        ),
        (
            |r| {
                r.interval = None;
                r.cron = "* * * * * *".into();
            },
            "cron",
        ),
        (
            |r| r.destinations = vec!["nowhere".into()],
            "destinations[0]",
        ),
        (|r| r.rules[0].below = Some(-100), "rules[0].below"),
        (
            |r| r.rules[0].move_percent = Some(-3.0),
            "rules[0].move_percent",
        ),
        (|r| r.cron = "0 * * * *".into(), "cron"),
        (
            |r| r.rules[0].product_index = Some(3),
            "rules[0].product_index",
        ),
    ];
    for (edit, field) in cases {
        let mut req = base();
        edit(&mut req);
        let err = c
            .create_schedule(with_token(req.clone(), CLIENT_TOKEN))
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{field}: {err:?}");
        assert!(
            err.message().starts_with(&format!("{field}: ")),
            "{field}: {err:?}"
        );
        let violations = err
            .get_error_details()
            .bad_request()
            .map(|b| b.field_violations.clone())
            .unwrap_or_default();
        assert_eq!(violations.len(), 1, "{err:?}");
        assert_eq!(violations[0].field, field);
    }
    let stored: i64 = sqlx::query_scalar("select count(*) from schedule")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(stored, 0, "nothing of a refused request is stored");

    // What is accepted is stored before the call returns; a retry with its key replays
    // it, and the key with another request is ALREADY_EXISTS.
    let mut req = base();
    req.idempotency_key = "watch-water".into();
    // A product's hints are stored with the schedule, and so searched with each run.
    req.products[0].brand = "제주삼다수".into();
    req.products[0].gtin = "8801234567893".into();
    let first = c
        .create_schedule(with_token(req.clone(), CLIENT_TOKEN))
        .await
        .unwrap()
        .into_inner();
    assert!(!first.replayed);
    let id = first.schedule.as_ref().unwrap().schedule_id;
    let stored = get(&mut c, id, CLIENT_TOKEN).await.unwrap();
    assert_eq!(stored.products, req.products);
    let again = c
        .create_schedule(with_token(req.clone(), CLIENT_TOKEN))
        .await
        .unwrap()
        .into_inner();
    assert!(again.replayed);
    assert_eq!(again.schedule, first.schedule);
    req.interval = every(120);
    let err = c
        .create_schedule(with_token(req, CLIENT_TOKEN))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::AlreadyExists, "{err:?}");
    let stored: i64 = sqlx::query_scalar("select count(*) from schedule")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(stored, 1);
    running.shutdown().await;
}

#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn a_client_sees_and_changes_only_its_own_and_pause_resume_delete_work(
    pool_opts: PgPoolOptions,
    opts: PgConnectOptions,
) {
    let pool = pool_opts.connect_with(opts.clone()).await.unwrap();
    let running = coordinator(&opts, None, &[]).await;
    let mut c = client(&running).await;
    let _node = Finisher::start(running.queue.clone(), Duration::ZERO, |_| 10_000);
    let id = create(&mut c, schedule_req(1), CLIENT_TOKEN)
        .await
        .schedule_id;

    // No token, or a node's: UNAUTHENTICATED.
    for token in [None, Some(common::NODE_TOKEN)] {
        let mut request = tonic::Request::new(pb::GetScheduleRequest { schedule_id: id });
        if let Some(token) = token {
            request = with_token(pb::GetScheduleRequest { schedule_id: id }, token);
        }
        let err = c.get_schedule(request).await.unwrap_err();
        assert_eq!(err.code(), Code::Unauthenticated, "{token:?}");
    }
    // Another client: NOT_FOUND for every call, and its list is empty.
    let not_found = |r: Result<tonic::Response<pb::Schedule>, tonic::Status>| {
        assert_eq!(r.unwrap_err().code(), Code::NotFound);
    };
    assert_eq!(
        get(&mut c, id, OTHER_TOKEN).await.unwrap_err().code(),
        Code::NotFound
    );
    not_found(
        c.pause_schedule(with_token(
            pb::PauseScheduleRequest { schedule_id: id },
            OTHER_TOKEN,
        ))
        .await,
    );
    not_found(
        c.resume_schedule(with_token(
            pb::ResumeScheduleRequest { schedule_id: id },
            OTHER_TOKEN,
        ))
        .await,
    );
    let err = c
        .delete_schedule(with_token(
            pb::DeleteScheduleRequest { schedule_id: id },
            OTHER_TOKEN,
        ))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    let lister = c.clone();
    let list = |token: &'static str, client: &str| {
        let mut c = lister.clone();
        let req = pb::ListSchedulesRequest {
            client: client.to_owned(),
            ..Default::default()
        };
        async move { c.list_schedules(with_token(req, token)).await }
    };
    assert!(
        list(OTHER_TOKEN, "")
            .await
            .unwrap()
            .into_inner()
            .schedules
            .is_empty()
    );
    let err = list(OTHER_TOKEN, common::CLIENT_NAME).await.unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied);
    let own = list(CLIENT_TOKEN, "").await.unwrap().into_inner().schedules;
    assert_eq!(
        own.iter().map(|s| s.schedule_id).collect::<Vec<_>>(),
        vec![id]
    );
    // An admin sees every client's.
    assert_eq!(
        get(&mut c, id, ADMIN).await.unwrap().client,
        common::CLIENT_NAME
    );
    assert_eq!(
        list(ADMIN, "").await.unwrap().into_inner().schedules.len(),
        1
    );

    // It runs; paused, it starts no run; resumed, it runs again.
    wait_schedule(&mut c, id, Duration::from_secs(20), |s| s.runs >= 2).await;
    let paused = c
        .pause_schedule(with_token(
            pb::PauseScheduleRequest { schedule_id: id },
            CLIENT_TOKEN,
        ))
        .await
        .unwrap()
        .into_inner();
    assert!(paused.paused);
    // The ops snapshot counts it (what GetOps, /ops, lpsctl ops and lps_schedules show).
    let ops = lps_coordinator::ops::Ops::new(running.queue.clone())
        .snapshot()
        .await
        .unwrap();
    assert_eq!((ops.schedules.active, ops.schedules.paused), (0, 1));
    assert_eq!(ops.schedules.failing, 0);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let runs = get(&mut c, id, CLIENT_TOKEN).await.unwrap().runs;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        get(&mut c, id, CLIENT_TOKEN).await.unwrap().runs,
        runs,
        "no run while paused"
    );
    let resumed = c
        .resume_schedule(with_token(
            pb::ResumeScheduleRequest { schedule_id: id },
            CLIENT_TOKEN,
        ))
        .await
        .unwrap()
        .into_inner();
    assert!(!resumed.paused);
    let ops = lps_coordinator::ops::Ops::new(running.queue.clone())
        .snapshot()
        .await
        .unwrap();
    assert_eq!((ops.schedules.active, ops.schedules.paused), (1, 0));
    wait_schedule(&mut c, id, Duration::from_secs(20), |s| s.runs >= runs + 2).await;

    // Deleted: gone, and no run of it starts any more.
    c.delete_schedule(with_token(
        pb::DeleteScheduleRequest { schedule_id: id },
        CLIENT_TOKEN,
    ))
    .await
    .unwrap();
    assert_eq!(
        get(&mut c, id, CLIENT_TOKEN).await.unwrap_err().code(),
        Code::NotFound
    );
    let count = || {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>(
                "select count(*) from search_request where idempotency_key like $1",
            )
            .bind(format!("schedule-{id}-run-%"))
            .fetch_one(&pool)
            .await
            .unwrap()
        }
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let searches = count().await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(count().await, searches, "no run after delete");
    assert!(
        list(CLIENT_TOKEN, "")
            .await
            .unwrap()
            .into_inner()
            .schedules
            .is_empty()
    );
    running.shutdown().await;
}

#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn list_schedules_pages_newest_first(pool: PgPool) {
    let running = coordinator(&pool.connect_options(), None, &["--schedule-poll", "1h"]).await;
    let mut c = client(&running).await;
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(
            create(&mut c, schedule_req(3600), CLIENT_TOKEN)
                .await
                .schedule_id,
        );
    }
    ids.reverse();
    let page = |token: String| pb::ListSchedulesRequest {
        page_size: 2,
        page_token: token,
        ..Default::default()
    };
    let first = c
        .list_schedules(with_token(page(String::new()), CLIENT_TOKEN))
        .await
        .unwrap()
        .into_inner();
    let second = c
        .list_schedules(with_token(
            page(first.next_page_token.clone()),
            CLIENT_TOKEN,
        ))
        .await
        .unwrap()
        .into_inner();
    let seen: Vec<i64> = first
        .schedules
        .iter()
        .chain(&second.schedules)
        .map(|s| s.schedule_id)
        .collect();
    assert_eq!(seen, ids, "newest first, each once");
    assert!(!first.next_page_token.is_empty());
    assert!(second.next_page_token.is_empty(), "the last page says so");
    // A token with other filters is INVALID_ARGUMENT naming it.
    let mut other = page(first.next_page_token);
    other.client = "someone-else".into();
    let err = c
        .list_schedules(with_token(other, ADMIN))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().starts_with("page_token: "), "{err:?}");
    running.shutdown().await;
}
