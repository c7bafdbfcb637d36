//! SearchService and OpsService end to end: the real tonic server on 127.0.0.1:0 against a
//! fresh migrated database per test (`#[sqlx::test]`), called with the generated clients
//! (and, in the last test, with the built `lpsctl` binary). Jobs are finished by driving the
//! queue directly (claim, then complete or fail), as a node would.

use std::{collections::HashMap, sync::Arc, time::Duration};

use lps_coordinator::{
    auth::{Token, Tokens},
    control::CONTROL_CHANNEL,
    db::MIGRATOR,
    grpc::{ops::OpsApi, search::SearchApi},
    queue::{ClaimedJob, EnqueueContext, Error as QueueError, MallLimits, Queue, QueueConfig},
    search::Searches,
};
use lps_proto::{
    model::{
        CardClass, ErrorClass, JobFailure, JobResult, Lease, MallId, Offer, RoundReport,
        SearchRequest, ShippingStatus,
    },
    pb::{self, ops_service_client::OpsServiceClient, search_service_client::SearchServiceClient},
};
use sqlx::{PgPool, postgres::PgListener};
use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;
use tokio_util::sync::CancellationToken;
use tonic::{
    Code, Request, Status, Streaming,
    transport::{Channel, Endpoint, Server},
};

mod common;

const CLIENT: &str = "client-secret-1";
const ADMIN: &str = "admin-secret-1";
const ALPHA: &str = "testmall-alpha";
const BETA: &str = "testmall-beta";
const WATER: &str = "제주 삼다수 2L x 12";
const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

struct Harness {
    pool: PgPool,
    queue: Queue,
    search: SearchServiceClient<Channel>,
    ops: OpsServiceClient<Channel>,
    shutdown: CancellationToken,
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

async fn start(pool: PgPool) -> Harness {
    let queue = Queue::new(pool.clone(), QueueConfig::default());
    for m in [ALPHA, BETA] {
        queue
            .upsert_mall(&MallLimits::unlimited(MallId::new(m).unwrap()))
            .await
            .unwrap();
    }
    let tokens = Arc::new(Tokens {
        client: vec![Token::new(CLIENT)],
        admin: vec![Token::new(ADMIN)],
        node: vec![Token::new("node-secret")],
        node_ids: Vec::new(),
    });
    let shutdown = CancellationToken::new();
    let search = SearchApi::new(queue.clone(), tokens.clone())
        .with_watch_poll(Duration::from_millis(20))
        .with_shutdown(shutdown.clone());
    let ops = OpsApi::new(queue.clone(), tokens);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(
        Server::builder()
            .add_service(search.into_service())
            .add_service(ops.into_service())
            .serve_with_incoming_shutdown(
                TcpListenerStream::new(listener),
                shutdown.clone().cancelled_owned(),
            ),
    );
    let channel = Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    Harness {
        pool,
        queue,
        search: SearchServiceClient::new(channel.clone()),
        ops: OpsServiceClient::new(channel),
        shutdown,
    }
}

fn authed<T>(msg: T, token: &str) -> Request<T> {
    let mut req = Request::new(msg);
    req.metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    req
}

fn client<T>(msg: T) -> Request<T> {
    authed(msg, CLIENT)
}

fn admin<T>(msg: T) -> Request<T> {
    authed(msg, ADMIN)
}

fn product(name: &str) -> pb::Product {
    pb::Product {
        name: name.into(),
        ..Default::default()
    }
}

fn search_req(products: &[&str], malls: &[&str]) -> pb::SearchRequest {
    pb::SearchRequest {
        products: products.iter().map(|p| product(p)).collect(),
        malls: malls.iter().map(|m| (*m).to_owned()).collect(),
        priority_class: pb::PriorityClass::Interactive as i32,
        ..Default::default()
    }
}

/// An offer whose shipping was read: paid with a fee, else free.
fn offer(mall: &str, price: i64, shipping: i64) -> Offer {
    Offer {
        mall: MallId::new(mall).unwrap(),
        title: format!("{WATER} ({price})"),
        price,
        shipping_fee: shipping,
        url: format!("http://127.0.0.1/{mall}/{price}"),
        seller: "seller".into(),
        match_score: 0.9,
        shipping: if shipping > 0 {
            ShippingStatus::Paid
        } else {
            ShippingStatus::Free
        },
        list_price: 0,
        flags: Vec::new(),
    }
}

/// An offer whose shipping could not be read (no fee).
fn unknown_shipping(mall: &str, price: i64) -> Offer {
    Offer {
        shipping: ShippingStatus::Unknown,
        ..offer(mall, price, 0)
    }
}

async fn count(pool: &PgPool, sql: &str) -> i64 {
    sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(sql.to_owned()))
        .fetch_one(pool)
        .await
        .unwrap()
}

async fn job_state(pool: &PgPool, job_id: i64) -> String {
    sqlx::query_scalar::<_, String>("select state::text from job where job_id = $1")
        .bind(job_id)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// Claims every claimable job (as `node`), by job id.
async fn claim_all(queue: &Queue, node: &str) -> HashMap<i64, ClaimedJob> {
    queue
        .claim(node, None, 64)
        .await
        .unwrap()
        .into_iter()
        .map(|j| (j.lease.job_id, j))
        .collect()
}

async fn complete(queue: &Queue, node: &str, lease: Lease, offers: Vec<Offer>) {
    let result = if offers.is_empty() {
        JobResult::not_found(lease)
    } else {
        JobResult::found(lease, offers).unwrap()
    };
    queue.complete_if_leased(node, &result).await.unwrap();
}

fn field_of(status: &Status) -> &str {
    status.message().split(':').next().unwrap_or_default()
}

/// The `ErrorInfo.reason` of a refusal (domain `lps.v1`).
fn reason_of(status: &Status) -> String {
    use tonic_types::StatusExt as _;
    let info = status
        .get_error_details()
        .error_info()
        .cloned()
        .unwrap_or_else(|| panic!("no ErrorInfo in {status:?}"));
    assert_eq!(info.domain, "lps.v1");
    info.reason
}

async fn next_status(stream: &mut Streaming<pb::SearchStatus>) -> Option<pb::SearchStatus> {
    tokio::time::timeout(Duration::from_secs(10), stream.message())
        .await
        .expect("watch stalled")
        .unwrap()
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn calls_without_a_valid_token_are_rejected(pool: PgPool) {
    let mut h = start(pool).await;

    let err = h
        .search
        .search(Request::new(search_req(&[WATER], &[ALPHA])))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unauthenticated);
    assert_eq!(reason_of(&err), "MISSING_TOKEN");
    let err = h
        .search
        .search(authed(search_req(&[WATER], &[ALPHA]), "not-a-token"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unauthenticated);
    assert_eq!(reason_of(&err), "UNKNOWN_TOKEN");
    assert!(!err.message().contains("not-a-token"));
    let err = h
        .search
        .get_search(authed(pb::GetSearchRequest { search_id: 1 }, "node-secret"))
        .await
        .unwrap_err();
    assert_eq!(
        err.code(),
        Code::Unauthenticated,
        "a node token is no client token"
    );
    let err = h
        .search
        .watch_search(Request::new(pb::WatchSearchRequest {
            search_id: 1,
            after_version: 0,
        }))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unauthenticated);
    let err = h
        .ops
        .get_ops(authed(pb::GetOpsRequest {}, "nope"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unauthenticated);
    assert_eq!(
        count(&h.pool, "select count(*) from search_request").await,
        0
    );

    // Writes of OpsService need an admin token.
    let err = h
        .ops
        .drain_node(client(pb::DrainNodeRequest {
            node_id: "node-1".into(),
        }))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied);
    assert_eq!(reason_of(&err), "ADMIN_TOKEN_REQUIRED");
    let err = h
        .ops
        .retry_dead(client(pb::RetryDeadRequest::default()))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied);
    let drained = h
        .ops
        .drain_node(admin(pb::DrainNodeRequest {
            node_id: "node-1".into(),
        }))
        .await
        .unwrap()
        .into_inner();
    assert!(!drained.found);
    // An admin token also serves client calls.
    h.ops.get_ops(admin(pb::GetOpsRequest {})).await.unwrap();
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn bad_input_is_rejected_naming_the_field_and_nothing_is_stored(pool: PgPool) {
    let mut h = start(pool).await;
    let long = "가".repeat(201);
    let cases = [
        (search_req(&[], &[ALPHA]), "products"),
        (
            search_req(&[WATER, long.as_str()], &[ALPHA]),
            "products[1].name",
        ),
        // Names of invisible characters only (zero-width space, joiner + BOM, direction
        // marks): nothing to search for, so never a job that goes dead.
        (
            search_req(&[WATER, "\u{200b}"], &[ALPHA]),
            "products[1].name",
        ),
        (
            search_req(&["\u{200d}\u{feff}"], &[ALPHA]),
            "products[0].name",
        ),
        (
            search_req(&["\u{200f}\u{202e}"], &[ALPHA]),
            "products[0].name",
        ),
        (
            pb::SearchRequest {
                max_age: Some(prost_types::Duration {
                    seconds: 1,
                    nanos: 1_000_000_000,
                }),
                ..search_req(&[WATER], &[ALPHA])
            },
            "max_age",
        ),
        (search_req(&[WATER], &[ALPHA, "nosuchmall"]), "malls[1]"),
        (search_req(&[WATER], &["Bad Mall"]), "malls[0]"),
        (
            pb::SearchRequest {
                priority: Some(100),
                ..search_req(&[WATER], &[ALPHA])
            },
            "priority",
        ),
    ];
    for (req, field) in cases {
        let err = h.search.search(client(req)).await.unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
        assert_eq!(field_of(&err), field, "{}", err.message());
        // The same, as google.rpc.BadRequest for other languages' tooling.
        use tonic_types::StatusExt as _;
        let violations = err
            .get_error_details()
            .bad_request()
            .map(|b| b.field_violations.clone())
            .unwrap_or_default();
        assert_eq!(violations.len(), 1, "{err:?}");
        assert_eq!(violations[0].field, field);
        assert!(
            err.message().ends_with(&violations[0].description),
            "{err:?}"
        );
    }
    for table in ["search_request", "search_item", "job"] {
        assert_eq!(
            count(&h.pool, &format!("select count(*) from {table}")).await,
            0,
            "{table}"
        );
    }

    let err = h
        .search
        .get_search(client(pb::GetSearchRequest { search_id: 0 }))
        .await
        .unwrap_err();
    assert_eq!(
        (err.code(), field_of(&err)),
        (Code::InvalidArgument, "search_id")
    );
    let err = h
        .search
        .get_search(client(pb::GetSearchRequest { search_id: 4242 }))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    let err = h
        .search
        .watch_search(client(pb::WatchSearchRequest {
            search_id: 4242,
            after_version: 0,
        }))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    let err = h
        .search
        .get_price_history(client(pb::GetPriceHistoryRequest {
            product: Some(product(WATER)),
            page_token: "bm90IGEgdG9rZW4".into(),
            ..Default::default()
        }))
        .await
        .unwrap_err();
    assert_eq!(
        (err.code(), field_of(&err)),
        (Code::InvalidArgument, "page_token")
    );
    let err = h
        .search
        .get_price_history(client(pb::GetPriceHistoryRequest::default()))
        .await
        .unwrap_err();
    assert_eq!(
        (err.code(), field_of(&err)),
        (Code::InvalidArgument, "product")
    );
    let err = h
        .ops
        .retry_dead(admin(pb::RetryDeadRequest {
            mall: "Bad Mall".into(),
            ..Default::default()
        }))
        .await
        .unwrap_err();
    assert_eq!(
        (err.code(), field_of(&err)),
        (Code::InvalidArgument, "mall")
    );
    let err = h
        .ops
        .drain_node(admin(pb::DrainNodeRequest {
            node_id: String::new(),
        }))
        .await
        .unwrap_err();
    assert_eq!(
        (err.code(), field_of(&err)),
        (Code::InvalidArgument, "node_id")
    );
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn search_shows_queued_then_offers_and_the_lowest_effective_price(pool: PgPool) {
    let mut h = start(pool).await;
    let mut req = client(search_req(&[WATER, "없는 상품"], &[ALPHA, BETA]));
    req.metadata_mut()
        .insert("traceparent", TRACEPARENT.parse().unwrap());
    req.metadata_mut()
        .insert("tracestate", "vendor=1".parse().unwrap());
    req.metadata_mut()
        .insert("x-lps-caller", "test-suite".parse().unwrap());
    let accepted = h.search.search(req).await.unwrap().into_inner();
    assert!(!accepted.replayed);
    assert!(accepted.version > 0);
    assert_eq!(accepted.items.len(), 4);
    assert!(
        accepted
            .items
            .iter()
            .all(|i| i.disposition == pb::Disposition::Queued as i32)
    );
    let job_of = |p: u32, m: &str| {
        accepted
            .items
            .iter()
            .find(|i| i.product_index == p && i.mall == m)
            .unwrap()
            .job_id
    };
    let (caller, traceparent): (Option<String>, Option<String>) =
        sqlx::query_as("select caller, traceparent from search_request where search_id = $1")
            .bind(accepted.search_id)
            .fetch_one(&h.pool)
            .await
            .unwrap();
    assert_eq!(caller.as_deref(), Some("test-suite"));
    assert_eq!(traceparent.as_deref(), Some(TRACEPARENT));
    let tracestate: Option<String> =
        sqlx::query_scalar("select tracestate from job where job_id = $1")
            .bind(job_of(0, ALPHA))
            .fetch_one(&h.pool)
            .await
            .unwrap();
    assert_eq!(tracestate.as_deref(), Some("vendor=1"));

    let get = pb::GetSearchRequest {
        search_id: accepted.search_id,
    };
    let queued = h.search.get_search(client(get)).await.unwrap().into_inner();
    assert_eq!(queued.version, accepted.version);
    assert!(!queued.r#final && !queued.cancelled);
    assert_eq!(queued.products.len(), 2);
    assert_eq!(queued.products[0].product.as_ref().unwrap().name, WATER);
    assert_eq!(
        queued.products[1].product.as_ref().unwrap().name,
        "없는 상품"
    );
    for p in &queued.products {
        assert!(p.lowest.is_none() && !p.r#final);
        let malls: Vec<_> = p.malls.iter().map(|m| m.mall.as_str()).collect();
        assert_eq!(malls, [ALPHA, BETA]);
        for m in &p.malls {
            assert_eq!(m.state, pb::JobState::Queued as i32);
            assert_eq!(m.disposition, pb::Disposition::Queued as i32);
            assert!(m.offers.is_empty());
        }
    }

    let claimed = claim_all(&h.queue, "node-1").await;
    assert_eq!(claimed.len(), 4);
    let running = h.search.get_search(client(get)).await.unwrap().into_inner();
    assert!(running.version > queued.version);
    assert!(
        running.products[0]
            .malls
            .iter()
            .all(|m| m.state == pb::JobState::Running as i32)
    );

    // The cheapest price (12,000) is not the cheapest buy: its shipping makes it 15,000.
    let lease = |id| claimed[&id].lease;
    complete(
        &h.queue,
        "node-1",
        lease(job_of(0, ALPHA)),
        vec![offer(ALPHA, 12_000, 3_000), offer(ALPHA, 14_000, 0)],
    )
    .await;
    complete(
        &h.queue,
        "node-1",
        lease(job_of(0, BETA)),
        vec![offer(BETA, 13_000, 500)],
    )
    .await;
    complete(&h.queue, "node-1", lease(job_of(1, ALPHA)), vec![]).await;
    let half = h.search.get_search(client(get)).await.unwrap().into_inner();
    assert!(half.products[0].r#final && !half.r#final);
    h.queue
        .fail_if_leased(
            "node-1",
            &JobFailure::new(
                lease(job_of(1, BETA)),
                ErrorClass::Permanent,
                "no site profile",
            ),
        )
        .await
        .unwrap();

    let done = h.search.get_search(client(get)).await.unwrap().into_inner();
    assert!(done.r#final);
    assert!(done.version > half.version);
    let water = &done.products[0];
    assert!(water.r#final);
    let alpha = &water.malls[0];
    assert_eq!(alpha.state, pb::JobState::Done as i32);
    assert_eq!(alpha.outcome, pb::Outcome::Found as i32);
    let effective: Vec<Option<i64>> = alpha.offers.iter().map(|o| o.effective_price).collect();
    assert_eq!(
        effective,
        [Some(14_000), Some(15_000)],
        "cheapest effective price first"
    );
    let lowest = water.lowest.as_ref().unwrap();
    assert_eq!(
        (
            lowest.mall.as_str(),
            lowest.price,
            lowest.shipping_fee,
            lowest.effective_price
        ),
        (BETA, 13_000, 500, Some(13_500))
    );
    let missing = &done.products[1];
    assert!(missing.lowest.is_none());
    assert_eq!(missing.malls[0].outcome, pb::Outcome::NotFound as i32);
    let dead = &missing.malls[1];
    assert_eq!(dead.state, pb::JobState::Dead as i32);
    assert_eq!(dead.error_class, pb::ErrorClass::Permanent as i32);
    assert_eq!(dead.error, "no site profile");
    assert_eq!(dead.attempts, 1);

    // A fresh stored result answers a repeat without a crawl.
    let again = h
        .search
        .search(client(pb::SearchRequest {
            max_age: Some(prost_types::Duration {
                seconds: 3600,
                nanos: 0,
            }),
            ..search_req(&[WATER], &[ALPHA])
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        again.items[0].disposition,
        pb::Disposition::CachedResult as i32
    );
    let cached = h
        .search
        .get_search(client(pb::GetSearchRequest {
            search_id: again.search_id,
        }))
        .await
        .unwrap()
        .into_inner();
    assert!(cached.r#final);
    assert_eq!(
        cached.products[0].lowest.as_ref().unwrap().effective_price,
        Some(14_000)
    );
    // Any age beyond the documented maximum (10,000 years, the largest Duration) is "any
    // stored answer", not a database range error.
    for seconds in [10_000 * 366 * 24 * 3600, i64::MAX] {
        let again = h
            .search
            .search(client(pb::SearchRequest {
                max_age: Some(prost_types::Duration { seconds, nanos: 0 }),
                ..search_req(&[WATER], &[ALPHA])
            }))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            again.items[0].disposition,
            pb::Disposition::CachedResult as i32,
            "max_age {seconds}s"
        );
    }
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn watch_streams_increasing_versions_until_final_and_resumes(pool: PgPool) {
    let mut h = start(pool).await;
    let accepted = h
        .search
        .search(client(search_req(&[WATER], &[ALPHA, BETA])))
        .await
        .unwrap()
        .into_inner();
    let watch = |after_version| {
        client(pb::WatchSearchRequest {
            search_id: accepted.search_id,
            after_version,
        })
    };
    let mut stream = h.search.watch_search(watch(0)).await.unwrap().into_inner();
    let first = next_status(&mut stream).await.unwrap();
    assert_eq!(first.version, accepted.version);
    assert!(!first.r#final);

    // Drive the jobs while the watch is open, with pauses so the watcher sees steps.
    let queue = h.queue.clone();
    let driver = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let claimed = claim_all(&queue, "node-1").await;
        let mut leases: Vec<Lease> = claimed.values().map(|j| j.lease).collect();
        leases.sort_by_key(|l| l.job_id);
        for (i, lease) in leases.into_iter().enumerate() {
            tokio::time::sleep(Duration::from_millis(150)).await;
            let price = 10_000 + i64::try_from(i).unwrap() * 1_000;
            let mall = claimed[&lease.job_id].mall.to_string();
            complete(&queue, "node-1", lease, vec![offer(&mall, price, 0)]).await;
        }
    });
    let mut seen = vec![first.clone()];
    while let Some(status) = next_status(&mut stream).await {
        seen.push(status);
    }
    driver.await.unwrap();
    assert!(seen.len() >= 3, "saw {} statuses", seen.len());
    for pair in seen.windows(2) {
        assert!(pair[1].version > pair[0].version, "versions must increase");
    }
    let last = seen.last().unwrap();
    assert!(last.r#final, "the stream ends after the final status");
    assert!(seen[..seen.len() - 1].iter().all(|s| !s.r#final));
    assert_eq!(last.products[0].lowest.as_ref().unwrap().price, 10_000);

    // Resuming from the final version: nothing newer, the stream just ends.
    let mut resumed = h
        .search
        .watch_search(watch(last.version))
        .await
        .unwrap()
        .into_inner();
    assert!(next_status(&mut resumed).await.is_none());
    // Resuming from an older version: only newer statuses, ending at final.
    let mut resumed = h
        .search
        .watch_search(watch(first.version))
        .await
        .unwrap()
        .into_inner();
    let mut again = Vec::new();
    while let Some(status) = next_status(&mut resumed).await {
        again.push(status);
    }
    assert!(!again.is_empty());
    assert!(again.iter().all(|s| s.version > first.version));
    assert_eq!(again.last().unwrap().version, last.version);
    assert!(again.last().unwrap().r#final);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn watch_ends_on_shutdown(pool: PgPool) {
    let mut h = start(pool).await;
    let accepted = h
        .search
        .search(client(search_req(&[WATER], &[ALPHA])))
        .await
        .unwrap()
        .into_inner();
    let mut stream = h
        .search
        .watch_search(client(pb::WatchSearchRequest {
            search_id: accepted.search_id,
            after_version: 0,
        }))
        .await
        .unwrap()
        .into_inner();
    next_status(&mut stream).await.unwrap();
    h.shutdown.cancel();
    let end = tokio::time::timeout(Duration::from_secs(10), stream.message())
        .await
        .expect("watch did not end on shutdown");
    match end {
        Err(status) => assert_eq!(status.code(), Code::Unavailable),
        Ok(None) => {}
        Ok(Some(s)) => panic!("unexpected status {s:?}"),
    }
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn cancel_keeps_jobs_another_active_search_shares(pool: PgPool) {
    let mut h = start(pool).await;
    let a = h
        .search
        .search(client(search_req(
            &["product one", "product two"],
            &[ALPHA],
        )))
        .await
        .unwrap()
        .into_inner();
    let b = h
        .search
        .search(client(search_req(&["product two"], &[ALPHA])))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(b.items[0].disposition, pb::Disposition::Joined as i32);
    let (one, two) = (a.items[0].job_id, a.items[1].job_id);
    assert_eq!(b.items[0].job_id, two);

    let r = h
        .search
        .cancel_search(client(pb::CancelSearchRequest {
            search_id: a.search_id,
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (r.cancelled_queued, r.cancelling_running, r.kept_shared),
        (1, 0, 1)
    );
    assert_eq!(job_state(&h.pool, one).await, "cancelled");
    assert_eq!(job_state(&h.pool, two).await, "queued");
    let status_a = h
        .search
        .get_search(client(pb::GetSearchRequest {
            search_id: a.search_id,
        }))
        .await
        .unwrap()
        .into_inner();
    assert!(status_a.cancelled);
    assert_eq!(
        status_a.products[0].malls[0].state,
        pb::JobState::Cancelled as i32
    );
    assert!(!status_a.r#final, "the shared job still runs");
    // Cancelling again changes nothing.
    let r = h
        .search
        .cancel_search(client(pb::CancelSearchRequest {
            search_id: a.search_id,
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (r.cancelled_queued, r.cancelling_running, r.kept_shared),
        (0, 0, 1)
    );
    // Once the other search is cancelled too, nobody needs the shared job.
    let r = h
        .search
        .cancel_search(client(pb::CancelSearchRequest {
            search_id: b.search_id,
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (r.cancelled_queued, r.cancelling_running, r.kept_shared),
        (1, 0, 0)
    );
    assert_eq!(job_state(&h.pool, two).await, "cancelled");

    // A running job: cancelled in the database, and its node is told over NOTIFY.
    let mut listener = PgListener::connect_with(&h.pool).await.unwrap();
    listener.listen(CONTROL_CHANNEL).await.unwrap();
    let c = h
        .search
        .search(client(search_req(&["product three"], &[ALPHA])))
        .await
        .unwrap()
        .into_inner();
    let claimed = claim_all(&h.queue, "node-7").await;
    let lease = claimed[&c.items[0].job_id].lease;
    let r = h
        .search
        .cancel_search(client(pb::CancelSearchRequest {
            search_id: c.search_id,
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (r.cancelled_queued, r.cancelling_running, r.kept_shared),
        (0, 1, 0)
    );
    assert_eq!(job_state(&h.pool, lease.job_id).await, "cancelled");
    let note = tokio::time::timeout(Duration::from_secs(5), listener.recv())
        .await
        .unwrap()
        .unwrap();
    let control: serde_json::Value = serde_json::from_str(note.payload()).unwrap();
    let cancel = &control["cancel"][0];
    assert_eq!(cancel["job_id"], lease.job_id);
    assert_eq!(cancel["lease_epoch"], lease.epoch);
    assert_eq!(cancel["node_id"], "node-7");
    assert_eq!(
        count(
            &h.pool,
            "select count(*) from job_attempt where ended = 'cancelled'"
        )
        .await,
        1
    );
    // The node's late result is stale.
    let late = JobResult::found(lease, vec![offer(ALPHA, 1, 0)]).unwrap();
    assert!(matches!(
        h.queue.complete_if_leased("node-7", &late).await,
        Err(QueueError::LeaseLost(_))
    ));

    let err = h
        .search
        .cancel_search(client(pb::CancelSearchRequest { search_id: 9999 }))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
}

/// A Search that joins a job while another search sharing it is being cancelled must never
/// be left relying on a cancelled job.
#[sqlx::test(migrator = "MIGRATOR")]
async fn cancel_racing_a_join_never_strands_the_joining_search(pool: PgPool) {
    let h = start(pool).await;
    let searches = Searches::new(h.queue.clone());
    let request = |name: &str| SearchRequest::try_from(search_req(&[name], &[ALPHA])).unwrap();
    for i in 0..40 {
        let name = format!("raced product {i}");
        let a = h
            .queue
            .enqueue(&request(&name), &EnqueueContext::default())
            .await
            .unwrap();
        let again = request(&name);
        let ctx = EnqueueContext::default();
        let (cancelled, b) = tokio::join!(
            searches.cancel(a.search_id, None),
            h.queue.enqueue(&again, &ctx),
        );
        let (cancelled, b) = (cancelled.unwrap(), b.unwrap());
        let b_job = b.items[0].job_id;
        assert_eq!(
            job_state(&h.pool, b_job).await,
            "queued",
            "round {i}: search B relies on job {b_job} ({:?}), A's cancel: {cancelled:?}",
            b.items[0].disposition
        );
    }
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn get_job_shows_state_offers_and_rounds(pool: PgPool) {
    let mut h = start(pool).await;
    let accepted = h
        .search
        .search(client(pb::SearchRequest {
            products: vec![pb::Product {
                code: "SKU-1".into(),
                name: WATER.into(),
                ..Default::default()
            }],
            malls: vec![ALPHA.into()],
            priority_class: pb::PriorityClass::Batch as i32,
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner();
    let job_id = accepted.items[0].job_id;
    let queued = h
        .search
        .get_job(client(pb::GetJobRequest { job_id }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(queued.state, pb::JobState::Queued as i32);
    assert_eq!(queued.priority, 50);
    assert_eq!(queued.max_attempts, 3);
    assert_eq!(queued.product.as_ref().unwrap().code, "SKU-1");
    assert!(queued.run_started_at.is_none() && queued.finished_at.is_none());

    let claimed = claim_all(&h.queue, "node-1").await;
    let running = h
        .search
        .get_job(client(pb::GetJobRequest { job_id }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(running.state, pb::JobState::Running as i32);
    assert_eq!(running.node_id, "node-1");
    assert_eq!(running.lease_epoch, 1);
    assert!(running.deadline_at.is_some());

    let mut result = JobResult::found(
        claimed[&job_id].lease,
        vec![offer(ALPHA, 9_000, 2_500), offer(ALPHA, 10_000, 0)],
    )
    .unwrap();
    result.rounds = vec![RoundReport {
        kind: "original".into(),
        query: WATER.into(),
        cards_seen: 40,
        matches: 2,
        elapsed_ms: 1_500,
        source: "embedded_json".into(),
        excluded: [("ad".to_owned(), 3), ("placeholder".to_owned(), 1)].into(),
        pages: 2,
    }];
    result.metrics.bytes_in = 1_000;
    result.metrics.cost_usd = 0.25;
    h.queue.complete_if_leased("node-1", &result).await.unwrap();

    let done = h
        .search
        .get_job(client(pb::GetJobRequest { job_id }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(done.job_id, job_id);
    assert_eq!(done.mall, ALPHA);
    assert_eq!(done.state, pb::JobState::Done as i32);
    assert_eq!(done.outcome, pb::Outcome::Found as i32);
    assert_eq!(
        done.node_id, "node-1",
        "the node of its last attempt stays on it"
    );
    assert!(done.finished_at.is_some());
    let effective: Vec<Option<i64>> = done.offers.iter().map(|o| o.effective_price).collect();
    assert_eq!(effective, [Some(10_000), Some(11_500)]);
    assert_eq!(done.rounds.len(), 1);
    assert_eq!(done.rounds[0].cards_seen, 40);
    assert_eq!(done.rounds[0].elapsed.unwrap().seconds, 1);
    // The round's source, exclusions and pages are kept in the job's rounds.
    assert_eq!(done.rounds[0].source, "embedded_json");
    assert_eq!(done.rounds[0].excluded.get("ad"), Some(&3));
    assert_eq!(done.rounds[0].excluded.get("placeholder"), Some(&1));
    assert_eq!(done.rounds[0].pages, 2);
    assert_eq!(done.bytes, 1_000);
    assert!((done.cost_usd - 0.25).abs() < 1e-9);

    let err = h
        .search
        .get_job(client(pb::GetJobRequest { job_id: 987_654 }))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn status_caps_offers_per_mall_but_get_job_shows_all(pool: PgPool) {
    let mut h = start(pool).await;
    let accepted = h
        .search
        .search(client(search_req(&[WATER], &[ALPHA])))
        .await
        .unwrap()
        .into_inner();
    let job_id = accepted.items[0].job_id;
    let claimed = claim_all(&h.queue, "node-1").await;
    let offers = (0..25).rev().map(|i| offer(ALPHA, 1_000 + i, 0)).collect();
    complete(&h.queue, "node-1", claimed[&job_id].lease, offers).await;

    let status = h
        .search
        .get_search(client(pb::GetSearchRequest {
            search_id: accepted.search_id,
        }))
        .await
        .unwrap()
        .into_inner();
    let shown: Vec<i64> = status.products[0].malls[0]
        .offers
        .iter()
        .map(|o| o.price)
        .collect();
    let cheapest: Vec<i64> = (1_000..1_020).collect();
    assert_eq!(shown, cheapest);
    let job = h
        .search
        .get_job(client(pb::GetJobRequest { job_id }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(job.offers.len(), 25);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn price_history_is_newest_first_within_since_and_pages(pool: PgPool) {
    let mut h = start(pool).await;
    // Entries from before entries had clients (client ''): every client sees them.
    let insert = "insert into price_history (product_key, client, recorded_at, observed_at, lowest_effective_price,
                                             lowest_mall, malls, covered_malls, complete)
                  values ($1, '', now() - $2::int * interval '1 day', now() - $2::int * interval '1 day', $3, $4, $5,
                          array[$4], $6)";
    let malls = serde_json::json!([
        {"mall": ALPHA, "price": 12000, "shipping_fee": 0, "effective_price": 12000,
         "url": "http://a", "title": "water"},
        {"mall": BETA, "price": 11000, "shipping_fee": 2500, "effective_price": 13500,
         "url": "http://b", "title": "water"}
    ]);
    for (key, days, price, complete) in [
        ("name:제주 삼다수 2l x 12", 1, 12_000, true),
        ("name:제주 삼다수 2l x 12", 2, 9_000, false),
        ("name:제주 삼다수 2l x 12", 3, 12_500, true),
        ("name:제주 삼다수 2l x 12", 40, 13_000, true),
        ("name:something else", 1, 1, true),
        ("code:SKU-9", 2, 777, true),
    ] {
        sqlx::query(insert)
            .bind(key)
            .bind(days)
            .bind(price)
            .bind(ALPHA)
            .bind(&malls)
            .bind(complete)
            .execute(&h.pool)
            .await
            .unwrap();
    }
    let history = |product: pb::Product, page_size, since| {
        client(pb::GetPriceHistoryRequest {
            product: Some(product),
            since,
            page_size,
            ..Default::default()
        })
    };
    // Spelling and case do not matter: the product's identity is normalised.
    let h30 = h
        .search
        .get_price_history(history(product("제주  삼다수 2L X 12"), 0, None))
        .await
        .unwrap()
        .into_inner();
    let prices: Vec<i64> = h30
        .entries
        .iter()
        .map(|e| e.lowest_effective_price)
        .collect();
    assert_eq!(
        prices,
        [12_000, 12_500],
        "newest first, 30 days by default, complete entries only"
    );
    assert!(h30.next_page_token.is_empty(), "one page");
    assert!(
        h30.entries
            .iter()
            .all(|e| e.complete && e.currency == "KRW")
    );
    assert_eq!(h30.entries[0].lowest_mall, ALPHA);
    assert_eq!(h30.entries[0].malls.len(), 2);
    assert_eq!(h30.entries[0].malls[1].effective_price, 13_500);
    assert!(h30.entries[0].at.unwrap().seconds > h30.entries[1].at.unwrap().seconds);

    // Pages of one: each page's token leads to the next, the last has none.
    let mut req = pb::GetPriceHistoryRequest {
        product: Some(product(WATER)),
        page_size: 1,
        include_incomplete: true,
        ..Default::default()
    };
    let mut paged = Vec::new();
    loop {
        let page = h
            .search
            .get_price_history(client(req.clone()))
            .await
            .unwrap()
            .into_inner();
        assert!(page.entries.len() <= 1);
        paged.extend(
            page.entries
                .iter()
                .map(|e| (e.lowest_effective_price, e.complete)),
        );
        if page.next_page_token.is_empty() {
            break;
        }
        req.page_token = page.next_page_token;
        assert!(paged.len() <= 3, "the pages end");
    }
    assert_eq!(paged, [(12_000, true), (9_000, false), (12_500, true)]);
    // A token belongs to its request: with other filters it is refused.
    let first = h
        .search
        .get_price_history(history(product(WATER), 1, None))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(first.entries.len(), 1);
    let err = h
        .search
        .get_price_history(client(pb::GetPriceHistoryRequest {
            product: Some(product(WATER)),
            page_size: 1,
            include_incomplete: true,
            page_token: first.next_page_token.clone(),
            ..Default::default()
        }))
        .await
        .unwrap_err();
    assert_eq!(
        (err.code(), field_of(&err)),
        (Code::InvalidArgument, "page_token")
    );
    // An older client's `limit` still sets the page size; a size above the largest is
    // the largest (AIP-158), not an error.
    #[allow(deprecated)]
    let old = h
        .search
        .get_price_history(client(pb::GetPriceHistoryRequest {
            product: Some(product(WATER)),
            limit: 1,
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(old.entries.len(), 1);
    let big = h
        .search
        .get_price_history(history(product(WATER), 5_000, None))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(big.entries.len(), 2);
    let since = prost_types::Timestamp {
        seconds: chrono::Utc::now().timestamp() - 50 * 86_400,
        nanos: 0,
    };
    let all = h
        .search
        .get_price_history(history(product(WATER), 0, Some(since)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(all.entries.len(), 3);
    let by_code = h
        .search
        .get_price_history(history(
            pb::Product {
                code: "SKU-9".into(),
                name: String::new(),
                ..Default::default()
            },
            0,
            None,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(by_code.entries.len(), 1);
    assert_eq!(by_code.entries[0].lowest_effective_price, 777);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn list_nodes_shows_connected_nodes_and_their_jobs(pool: PgPool) {
    let mut h = start(pool).await;
    let insert = "insert into node_session (node_id, session_id, coordinator_id, version, slots, free_slots, malls, draining, disconnected_at)
                  values ($1, gen_random_uuid(), 'coord-a', '0.1.0', $2, $3, $4, $5, $6)";
    for (node, slots, free, malls, draining, gone) in [
        ("node-1", 4, 3, vec![ALPHA.to_owned()], false, false),
        ("node-2", 2, 2, vec![], true, false),
        ("node-3", 2, 2, vec![], false, true),
    ] {
        sqlx::query(insert)
            .bind(node)
            .bind(slots)
            .bind(free)
            .bind(malls)
            .bind(draining)
            .bind(gone.then(chrono::Utc::now))
            .execute(&h.pool)
            .await
            .unwrap();
    }
    let accepted = h
        .search
        .search(client(search_req(&[WATER], &[ALPHA])))
        .await
        .unwrap()
        .into_inner();
    claim_all(&h.queue, "node-1").await;

    let nodes = h
        .ops
        .list_nodes(client(pb::ListNodesRequest::default()))
        .await
        .unwrap()
        .into_inner()
        .nodes;
    let ids: Vec<_> = nodes.iter().map(|n| n.node_id.as_str()).collect();
    assert_eq!(
        ids,
        ["node-1", "node-2"],
        "a disconnected node is not listed"
    );
    let n1 = &nodes[0];
    assert_eq!((n1.slots, n1.free_slots), (4, 3));
    assert_eq!(n1.malls, [ALPHA]);
    assert_eq!(n1.running_jobs, [accepted.items[0].job_id]);
    assert_eq!(n1.coordinator, "coord-a");
    assert_eq!(n1.version, "0.1.0");
    assert!(!n1.session_id.is_empty() && n1.connected_at.is_some());
    assert!(nodes[1].draining && nodes[1].running_jobs.is_empty());
    let first = h
        .ops
        .list_nodes(client(pb::ListNodesRequest {
            page_size: 1,
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(first.nodes.len(), 1);
    let second = h
        .ops
        .list_nodes(client(pb::ListNodesRequest {
            page_size: 1,
            page_token: first.next_page_token,
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (
            second.nodes[0].node_id.as_str(),
            second.next_page_token.as_str()
        ),
        ("node-2", ""),
        "the second page is the last"
    );

    let drained = h
        .ops
        .drain_node(admin(pb::DrainNodeRequest {
            node_id: "node-1".into(),
        }))
        .await
        .unwrap()
        .into_inner();
    assert!(drained.found);
    assert_eq!(
        count(
            &h.pool,
            "select count(*) from node_session where node_id = 'node-1' and draining"
        )
        .await,
        1
    );
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn retry_dead_requeues_dead_jobs_but_not_over_an_active_one(pool: PgPool) {
    let mut h = start(pool).await;
    let first = h
        .search
        .search(client(search_req(
            &["product one", "product two"],
            &[ALPHA],
        )))
        .await
        .unwrap()
        .into_inner();
    let (one, two) = (first.items[0].job_id, first.items[1].job_id);
    for job in claim_all(&h.queue, "node-1").await.into_values() {
        h.queue
            .fail_if_leased(
                "node-1",
                &JobFailure::new(job.lease, ErrorClass::PageBlocked, "burned 3 ports"),
            )
            .await
            .unwrap();
    }
    assert_eq!(job_state(&h.pool, one).await, "dead");
    assert_eq!(job_state(&h.pool, two).await, "dead");
    // Someone asks for product two again: a new active job holds its key.
    let again = h
        .search
        .search(client(search_req(&["product two"], &[ALPHA])))
        .await
        .unwrap()
        .into_inner();
    assert_ne!(again.items[0].job_id, two);

    let none = h
        .ops
        .retry_dead(admin(pb::RetryDeadRequest {
            mall: BETA.into(),
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(none.requeued, 0, "no dead job of that mall");
    let before = h
        .search
        .get_search(client(pb::GetSearchRequest {
            search_id: first.search_id,
        }))
        .await
        .unwrap()
        .into_inner();
    assert!(before.r#final);
    let r = h
        .ops
        .retry_dead(admin(pb::RetryDeadRequest::default()))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.requeued, 1);
    assert_eq!(job_state(&h.pool, one).await, "queued");
    assert_eq!(
        job_state(&h.pool, two).await,
        "dead",
        "its key has an active job"
    );
    let job = h
        .search
        .get_job(client(pb::GetJobRequest { job_id: one }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(job.attempts, 0);
    assert_eq!(job.error_class, 0);
    assert!(job.finished_at.is_none());
    let after = h
        .search
        .get_search(client(pb::GetSearchRequest {
            search_id: first.search_id,
        }))
        .await
        .unwrap()
        .into_inner();
    assert!(!after.r#final && after.version > before.version);
    // The requeued job is claimable at once.
    let claimed = claim_all(&h.queue, "node-2").await;
    assert!(claimed.contains_key(&one));
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn ops_snapshot_and_proxy_ports(pool: PgPool) {
    let mut h = start(pool).await;
    // Jobs: 3 queued → 1 running, 1 dead, 1 queued.
    h.search
        .search(client(search_req(&["p1", "p2", "p3"], &[ALPHA])))
        .await
        .unwrap();
    let mut claimed: Vec<ClaimedJob> = h
        .queue
        .claim("node-1", None, 2)
        .await
        .unwrap()
        .into_iter()
        .collect();
    let dead = claimed.pop().unwrap();
    h.queue
        .fail_if_leased(
            "node-1",
            &JobFailure::new(dead.lease, ErrorClass::Permanent, "nope"),
        )
        .await
        .unwrap();

    let statements = [
        "insert into node_session (node_id, session_id, coordinator_id, slots, free_slots, draining, disconnected_at) values
           ('node-1', gen_random_uuid(), 'c', 4, 3, false, null),
           ('node-2', gen_random_uuid(), 'c', 4, 4, true, null),
           ('node-3', gen_random_uuid(), 'c', 8, 8, false, now())",
        "insert into proxy_port (host, port, holder_node, leased_until, rest_until, cooldown_until, use_count, burn_count, last_reason) values
           ('gw', 10001, null, null, null, null, 5, 0, 'budget'),
           ('gw', 10002, 'node-1', now() + interval '1 minute', null, null, 1, 0, null),
           ('gw', 10003, null, null, now() + interval '1 minute', null, 3, 0, 'budget'),
           ('gw', 10004, null, null, null, now() + interval '10 minutes', 9, 2, 'block'),
           ('gw', 10005, null, null, now() - interval '1 minute', now() - interval '1 minute', 2, 1, 'block')",
        "insert into proxy_port (host, port, enabled) values ('gw', 10099, false)",
        "insert into proxy_port_cooldown (host, port, mall, cooldown_until) values
           ('gw', 10001, 'testmall-beta', now() + interval '5 minutes'),
           ('gw', 10005, 'testmall-beta', now() - interval '5 minutes')",
        "insert into bot_detection (mall, ip_request_no, detected_at) values
           ('testmall-alpha', 1, now() - interval '5 minutes'),
           ('testmall-alpha', 2, now() - interval '50 minutes'),
           ('testmall-beta', 3, now() - interval '2 hours')",
        "insert into ip_session (host, port, mall, requests, ok, blocked, elapsed_ms, end_reason, ended_at) values
           ('gw', 10004, 'testmall-alpha', 2, 1, 1, 5000, 'block', now() - interval '1 hour'),
           ('gw', 10004, 'testmall-alpha', 2, 1, 1, 5000, 'block', now() - interval '7 hours'),
           ('gw', 10001, 'testmall-alpha', 3, 3, 0, 9000, 'budget', now() - interval '1 hour')",
    ];
    for sql in statements {
        sqlx::query(sql).execute(&h.pool).await.unwrap();
    }

    let ops = h
        .ops
        .get_ops(admin(pb::GetOpsRequest {}))
        .await
        .unwrap()
        .into_inner();
    let jobs: HashMap<i32, i64> = ops.jobs.iter().map(|c| (c.state, c.count)).collect();
    assert_eq!(jobs[&(pb::JobState::Queued as i32)], 1);
    assert_eq!(jobs[&(pb::JobState::Running as i32)], 1);
    assert_eq!(jobs[&(pb::JobState::Dead as i32)], 1);
    assert_eq!(jobs[&(pb::JobState::Done as i32)], 0);
    assert_eq!(ops.dead_last_hour, 1);
    assert_eq!(ops.stuck_running, 0);
    assert_eq!(ops.nodes_connected, 2);
    assert_eq!(
        ops.free_slots, 3,
        "a draining node's slots are not capacity"
    );
    assert_eq!(ops.proxy_ports_total, 5, "a disabled port is not counted");
    assert_eq!(ops.proxy_ports_available, 2);
    assert!((ops.proxy_ports_available_pct - 40.0).abs() < 1e-9);
    assert_eq!(ops.blocks_last_hour, 2);
    assert_eq!(ops.block_ended_sessions_6h, 1);
    assert!(ops.at.is_some());
    let mall = |m: &str| ops.malls.iter().find(|x| x.mall == m).unwrap().clone();
    let alpha = mall(ALPHA);
    assert_eq!((alpha.queued, alpha.running), (1, 1));
    assert_eq!(alpha.blocks_last_hour, 2);
    assert_eq!(alpha.ports_cooling, 1);
    let beta = mall(BETA);
    assert_eq!(beta.blocks_last_hour, 0);
    assert_eq!(beta.ports_cooling, 2, "every-mall cooldown plus beta's own");
    assert_eq!(alpha.ports_available, 2);
    assert_eq!(beta.ports_available, 1, "beta's own cooldown takes 10001");
    assert!((beta.ports_available_pct - 20.0).abs() < 1e-9);

    let ports = h
        .ops
        .list_proxy_ports(client(pb::ListProxyPortsRequest::default()))
        .await
        .unwrap()
        .into_inner()
        .ports;
    #[allow(deprecated)]
    let states: Vec<(u32, &str)> = ports.iter().map(|p| (p.port, p.state.as_str())).collect();
    let enum_states: Vec<(u32, i32)> = ports.iter().map(|p| (p.port, p.port_state)).collect();
    assert_eq!(
        states,
        [
            (10001, "available"),
            (10002, "leased"),
            (10003, "resting"),
            (10004, "cooling"),
            (10005, "available"),
        ]
    );
    use pb::PortState as P;
    assert_eq!(
        enum_states,
        [
            (10001, P::Available as i32),
            (10002, P::Leased as i32),
            (10003, P::Resting as i32),
            (10004, P::Cooling as i32),
            (10005, P::Available as i32),
        ]
    );
    // Pages of two, in the list's order, the last without a token.
    let mut req = pb::ListProxyPortsRequest {
        page_size: 2,
        ..Default::default()
    };
    let mut paged = Vec::new();
    loop {
        let page = h
            .ops
            .list_proxy_ports(client(req.clone()))
            .await
            .unwrap()
            .into_inner();
        paged.extend(page.ports.iter().map(|p| p.port));
        if page.next_page_token.is_empty() {
            break;
        }
        req.page_token = page.next_page_token;
    }
    assert_eq!(paged, [10001, 10002, 10003, 10004, 10005]);
    assert_eq!(ports[0].cooling_malls, [BETA]);
    assert!(
        ports[4].cooling_malls.is_empty(),
        "an expired cooldown is over"
    );
    assert_eq!(ports[1].holder_node, "node-1");
    assert_eq!(ports[3].burn_count, 2);
    assert_eq!(ports[3].last_reason, "block");
    assert_eq!(ports[0].use_count, 5);

    // No ports at all reads as 100 % available.
    sqlx::query("delete from proxy_port")
        .execute(&h.pool)
        .await
        .unwrap();
    let ops = h
        .ops
        .get_ops(admin(pb::GetOpsRequest {}))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(ops.proxy_ports_total, 0);
    assert!((ops.proxy_ports_available_pct - 100.0).abs() < 1e-9);
}

/// Runs the built `lpsctl` against the test server.
#[sqlx::test(migrator = "MIGRATOR")]
async fn lowest_is_over_known_shipping_and_a_cheaper_unknown_is_possibly_lower(pool: PgPool) {
    const UNREAD: &str = "배송비 모르는 상품";
    let mut h = start(pool).await;
    let accepted = h
        .search
        .search(client(search_req(&[WATER, UNREAD], &[ALPHA, BETA])))
        .await
        .unwrap()
        .into_inner();
    let job_of = |p: u32, m: &str| {
        accepted
            .items
            .iter()
            .find(|i| i.product_index == p && i.mall == m)
            .unwrap()
            .job_id
    };
    let claimed = claim_all(&h.queue, "node-1").await;
    let lease = |id| claimed[&id].lease;
    let flagged = Offer {
        list_price: 14_000,
        flags: vec![CardClass::Overseas],
        ..offer(ALPHA, 12_000, 0)
    };
    // The cheapest price (9,000) has unknown shipping: it is shown after the offer with
    // known shipping (12,000, free), so the mall's first offer is never one priced as if
    // shipping were free.
    complete(
        &h.queue,
        "node-1",
        lease(job_of(0, ALPHA)),
        vec![
            unknown_shipping(ALPHA, 12_000),
            unknown_shipping(ALPHA, 9_000),
            flagged,
        ],
    )
    .await;
    complete(
        &h.queue,
        "node-1",
        lease(job_of(0, BETA)),
        vec![offer(BETA, 11_000, 2_500)],
    )
    .await;
    complete(
        &h.queue,
        "node-1",
        lease(job_of(1, ALPHA)),
        vec![unknown_shipping(ALPHA, 5_000)],
    )
    .await;
    complete(&h.queue, "node-1", lease(job_of(1, BETA)), vec![]).await;

    let status = h
        .search
        .get_search(client(pb::GetSearchRequest {
            search_id: accepted.search_id,
        }))
        .await
        .unwrap()
        .into_inner();
    assert!(status.r#final);
    let water = &status.products[0];
    let shown: Vec<(Option<i64>, i64, i32)> = water.malls[0]
        .offers
        .iter()
        .map(|o| (o.effective_price, o.price, o.shipping))
        .collect();
    let (unknown, free) = (
        pb::ShippingStatus::Unknown as i32,
        pb::ShippingStatus::Free as i32,
    );
    assert_eq!(
        shown,
        [
            (Some(12_000), 12_000, free),
            (None, 9_000, unknown),
            (None, 12_000, unknown)
        ]
    );
    // The mall's own answer, beside the product's.
    let mall = &water.malls[0];
    assert_eq!(mall.lowest.as_ref(), Some(&mall.offers[0]));
    assert_eq!(mall.possibly_lower.as_ref(), Some(&mall.offers[1]));
    let beta = &water.malls[1];
    assert_eq!(beta.lowest.as_ref().unwrap().effective_price, Some(13_500));
    assert!(beta.possibly_lower.is_none());
    let answer = water.lowest.as_ref().unwrap();
    assert_eq!(
        (
            answer.mall.as_str(),
            answer.effective_price,
            answer.shipping
        ),
        (ALPHA, Some(12_000), free)
    );
    assert_eq!(answer.list_price, 14_000);
    assert_eq!(answer.flags, [pb::CardClass::Overseas as i32]);
    let maybe = water.possibly_lower.as_ref().unwrap();
    assert_eq!(
        (
            maybe.mall.as_str(),
            maybe.price,
            maybe.shipping_fee,
            maybe.shipping
        ),
        (ALPHA, 9_000, 0, unknown)
    );
    // Only offers of unknown shipping: no answer, but the cheapest is shown beside it.
    let unread = &status.products[1];
    assert!(unread.lowest.is_none(), "{unread:?}");
    assert_eq!(unread.possibly_lower.as_ref().unwrap().price, 5_000);

    let job = h
        .search
        .get_job(client(pb::GetJobRequest {
            job_id: job_of(0, ALPHA),
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        job.offers, water.malls[0].offers,
        "GetJob in the same order"
    );

    // Price history: the answer over known shipping only; none for the unread product.
    let history = |name: &str| pb::GetPriceHistoryRequest {
        product: Some(product(name)),
        ..Default::default()
    };
    let entries = h
        .search
        .get_price_history(client(history(WATER)))
        .await
        .unwrap()
        .into_inner()
        .entries;
    assert_eq!(entries.len(), 1);
    assert_eq!(
        (
            entries[0].lowest_effective_price,
            entries[0].lowest_mall.as_str()
        ),
        (12_000, ALPHA)
    );
    let unread_history = h
        .search
        .get_price_history(client(history(UNREAD)))
        .await
        .unwrap()
        .into_inner();
    assert!(unread_history.entries.is_empty());

    // What lpsctl prints of it: the shipping column, the answer and the line beside it;
    // JSON carries it all.
    let table = lps_cli::text::search_status(&status);
    let lines: Vec<&str> = table.lines().collect();
    let at = |prefix: &str| {
        lines
            .iter()
            .position(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no line {prefix:?} in\n{table}"))
    };
    // A mall's row shows its lowest with known shipping.
    let alpha_row: Vec<&str> = lines[at(ALPHA)].split_whitespace().collect();
    assert!(
        alpha_row.contains(&"무료") && alpha_row.contains(&"12,000"),
        "{table}"
    );
    let beta_row: Vec<&str> = lines[at(BETA)].split_whitespace().collect();
    assert!(
        beta_row.contains(&"2,500") && beta_row.contains(&"13,500"),
        "{table}"
    );
    let lowest = at("lowest: 12,000 (12,000 + 무료 shipping) at testmall-alpha");
    assert!(
        lines[lowest + 1]
            .starts_with("possibly lower, shipping unknown: testmall-alpha 9,000 제주 삼다수"),
        "{table}"
    );
    let none = at("lowest: no offer with known shipping found");
    assert!(
        lines[none + 1].starts_with("possibly lower, shipping unknown: testmall-alpha 5,000"),
        "{table}"
    );
    let json = lps_cli::json::search_status(&status);
    let water = &json["products"][0];
    assert_eq!(water["lowest"]["shipping"], "free");
    assert_eq!(water["lowest"]["list_price"], 14_000);
    assert_eq!(water["lowest"]["flags"], serde_json::json!(["overseas"]));
    assert_eq!(water["possibly_lower"]["shipping"], "unknown");
    assert_eq!(water["possibly_lower"]["price"], 9_000);
    assert_eq!(water["malls"][1]["offers"][0]["shipping"], "paid");
    assert_eq!(json["products"][1]["lowest"], serde_json::Value::Null);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn status_keeps_the_cheapest_known_offer_behind_many_of_unknown_shipping(pool: PgPool) {
    let mut h = start(pool).await;
    let accepted = h
        .search
        .search(client(search_req(&[WATER], &[ALPHA])))
        .await
        .unwrap()
        .into_inner();
    let job_id = accepted.items[0].job_id;
    let claimed = claim_all(&h.queue, "node-1").await;
    let mut offers: Vec<Offer> = (0..25)
        .map(|i| unknown_shipping(ALPHA, 1_000 + i))
        .collect();
    offers.push(offer(ALPHA, 5_000, 3_000));
    complete(&h.queue, "node-1", claimed[&job_id].lease, offers).await;
    let status = h
        .search
        .get_search(client(pb::GetSearchRequest {
            search_id: accepted.search_id,
        }))
        .await
        .unwrap()
        .into_inner();
    let p = &status.products[0];
    let offers = &p.malls[0].offers;
    assert_eq!(
        offers.len(),
        20,
        "the known one, then 19 of unknown shipping"
    );
    assert_eq!(
        offers[0].effective_price,
        Some(8_000),
        "known shipping first"
    );
    assert!(offers[1..].iter().all(|o| o.effective_price.is_none()));
    assert_eq!(
        offers[1].price, 1_000,
        "then the cheapest of unknown shipping"
    );
    assert_eq!(p.lowest.as_ref().unwrap().effective_price, Some(8_000));
    assert_eq!(p.possibly_lower.as_ref().unwrap().price, 1_000);
}
