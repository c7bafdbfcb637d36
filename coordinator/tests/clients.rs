//! SearchService for several clients, against the real coordinator (tokens, limits and
//! all from its configuration) on a fresh database per test: each client's idempotency
//! keys and searches are its own, an admin sees all, limits answer RESOURCE_EXHAUSTED with
//! the details gRPC tooling reads, and price history is written with the final status.
//! Jobs are finished by driving the queue directly, as a node would.

use std::time::Duration;

use lps_coordinator::{
    app::Running,
    queue::{MallLimits, Queue, QueueConfig},
};
use lps_proto::{
    model::{ErrorClass, JobFailure, JobResult, MallId, Offer, PageEvidence, ShippingStatus},
    pb::{self, ops_service_client::OpsServiceClient, search_service_client::SearchServiceClient},
};
use sqlx::PgPool;
use tonic::{Code, Status, transport::Channel};
use tonic_types::StatusExt as _;

mod common;

use common::with_token;

const TEAM_A: &str = "team-a-token-0000001";
const TEAM_B: &str = "team-b-token-0000001";
const OPS: &str = "ops-admin-token-00001";
const ALPHA: &str = "testmall-alpha";
const BETA: &str = "testmall-beta";
const WATER: &str = "제주 삼다수 2L x 12";

async fn start(pool: &PgPool, extra: &[&str]) -> Running {
    let mut args = vec![
        "--client-tokens",
        "team-a=team-a-token-0000001,team-b=team-b-token-0000001",
        "--admin-tokens",
        "ops=ops-admin-token-00001",
    ];
    args.extend_from_slice(extra);
    let running = common::start_with_mall(pool, ALPHA, &args).await;
    running
        .queue
        .upsert_mall(&MallLimits::unlimited(MallId::new(BETA).unwrap()))
        .await
        .unwrap();
    running
}

async fn clients(running: &Running) -> (SearchServiceClient<Channel>, OpsServiceClient<Channel>) {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", running.grpc_addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    (
        SearchServiceClient::new(channel.clone()),
        OpsServiceClient::new(channel),
    )
}

fn request(products: &[&str], malls: &[&str], key: &str) -> pb::SearchRequest {
    pb::SearchRequest {
        products: products
            .iter()
            .map(|p| pb::Product {
                code: String::new(),
                name: (*p).to_owned(),
                ..Default::default()
            })
            .collect(),
        malls: malls.iter().map(|m| (*m).to_owned()).collect(),
        idempotency_key: key.to_owned(),
        ..Default::default()
    }
}

async fn count(pool: &PgPool, sql: &'static str) -> i64 {
    sqlx::query_scalar(sql).fetch_one(pool).await.unwrap()
}

fn reason(status: &Status) -> Option<String> {
    status.get_details_error_info().map(|i| i.reason)
}

fn offer(mall: &str, price: i64) -> Offer {
    Offer {
        mall: MallId::new(mall).unwrap(),
        title: format!("{WATER} {price}"),
        price,
        shipping_fee: 0,
        url: format!("http://127.0.0.1/{mall}/{price}"),
        seller: "seller".into(),
        match_score: 0.9,
        shipping: ShippingStatus::Free,
        list_price: 0,
        flags: Vec::new(),
    }
}

#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn idempotency_keys_are_per_client_and_bind_the_request(pool: PgPool) {
    let running = start(&pool, &[]).await;
    let (mut search, _) = clients(&running).await;
    let body = request(&[WATER], &[ALPHA], "order-42");
    let a = search
        .search(with_token(body.clone(), TEAM_A))
        .await
        .unwrap()
        .into_inner();
    let b = search
        .search(with_token(body.clone(), TEAM_B))
        .await
        .unwrap()
        .into_inner();
    assert_ne!(a.search_id, b.search_id, "two clients, two searches");
    assert!(!a.replayed && !b.replayed);
    assert_eq!(
        b.items[0].disposition,
        pb::Disposition::Joined as i32,
        "the second client's search joins the first's job"
    );

    // The same client, key and request: the first search again. The malls are a set.
    let mut reordered = request(&[WATER], &[ALPHA], "order-42");
    reordered.malls = vec![ALPHA.into()];
    let again = search
        .search(with_token(reordered, TEAM_A))
        .await
        .unwrap()
        .into_inner();
    assert_eq!((again.search_id, again.replayed), (a.search_id, true));

    // The same key with a different request is refused, naming the key, storing nothing.
    let searches_before = count(&pool, "select count(*) from search_request").await;
    let jobs_before = count(&pool, "select count(*) from job").await;
    let changed = request(&[WATER, "코카콜라 500ml 24개"], &[ALPHA], "order-42");
    let err = search
        .search(with_token(changed, TEAM_A))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::AlreadyExists, "{err:?}");
    assert!(err.message().contains("\"order-42\""), "{}", err.message());
    let info = err.get_details_error_info().unwrap();
    assert_eq!(info.reason, "IDEMPOTENCY_KEY_REUSED");
    assert_eq!(info.domain, "lps.v1");
    assert_eq!(info.metadata["search_id"], a.search_id.to_string());
    assert_eq!(
        count(&pool, "select count(*) from search_request").await,
        searches_before
    );
    assert_eq!(count(&pool, "select count(*) from job").await, jobs_before);

    // Two calls with one new key at once: one search, the other call replays it.
    let body = request(&[WATER], &[BETA], "order-43");
    let (mut s1, mut s2) = (search.clone(), search.clone());
    let (x, y) = tokio::join!(
        s1.search(with_token(body.clone(), TEAM_B)),
        s2.search(with_token(body, TEAM_B)),
    );
    let (x, y) = (x.unwrap().into_inner(), y.unwrap().into_inner());
    assert_eq!(x.search_id, y.search_id);
    assert!(x.replayed ^ y.replayed, "exactly one call created it");
    running.shutdown().await;
}

#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn a_client_sees_and_cancels_only_its_own_searches_and_an_admin_all(pool: PgPool) {
    let running = start(&pool, &[]).await;
    let (mut search, mut ops) = clients(&running).await;
    let mut own = with_token(request(&[WATER], &[ALPHA], ""), TEAM_A);
    own.metadata_mut()
        .insert("x-lps-caller", "pricing-service".parse().unwrap());
    let a = search.search(own).await.unwrap().into_inner();
    let b = search
        .search(with_token(
            request(&["코카콜라 500ml 24개"], &[ALPHA], ""),
            TEAM_B,
        ))
        .await
        .unwrap()
        .into_inner();

    let status = search
        .get_search(with_token(
            pb::GetSearchRequest {
                search_id: a.search_id,
            },
            TEAM_A,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (status.client.as_str(), status.caller.as_str()),
        ("team-a", "pricing-service")
    );

    // Team B: A's search, its watch, its cancel and its job are "not found".
    let get = search
        .get_search(with_token(
            pb::GetSearchRequest {
                search_id: a.search_id,
            },
            TEAM_B,
        ))
        .await
        .unwrap_err();
    assert_eq!(get.code(), Code::NotFound);
    let watch = search
        .watch_search(with_token(
            pb::WatchSearchRequest {
                search_id: a.search_id,
                after_version: 0,
            },
            TEAM_B,
        ))
        .await
        .unwrap_err();
    assert_eq!(watch.code(), Code::NotFound);
    let cancel = search
        .cancel_search(with_token(
            pb::CancelSearchRequest {
                search_id: a.search_id,
            },
            TEAM_B,
        ))
        .await
        .unwrap_err();
    assert_eq!(cancel.code(), Code::NotFound);
    assert_eq!(
        count(
            &pool,
            "select count(*) from search_request where cancelled_at is not null"
        )
        .await,
        0,
        "the refused cancel changed nothing"
    );
    assert_eq!(
        count(&pool, "select count(*) from job where state = 'queued'").await,
        2
    );
    let job = search
        .get_job(with_token(
            pb::GetJobRequest {
                job_id: a.items[0].job_id,
            },
            TEAM_B,
        ))
        .await
        .unwrap_err();
    assert_eq!(job.code(), Code::NotFound);
    assert!(
        search
            .get_job(with_token(
                pb::GetJobRequest {
                    job_id: a.items[0].job_id,
                },
                TEAM_A,
            ))
            .await
            .is_ok()
    );

    // Lists: a client its own, an admin everyone's or one client's.
    let list = |token: &str, client: &str| {
        with_token(
            pb::ListSearchesRequest {
                client: client.to_owned(),
                ..Default::default()
            },
            token,
        )
    };
    let ids = |r: pb::ListSearchesResponse| -> Vec<(i64, String)> {
        r.searches
            .into_iter()
            .map(|s| (s.search_id, s.client))
            .collect()
    };
    let mine = search.list_searches(list(TEAM_A, "")).await.unwrap();
    assert_eq!(ids(mine.into_inner()), [(a.search_id, "team-a".to_owned())]);
    let all = search.list_searches(list(OPS, "")).await.unwrap();
    assert_eq!(
        ids(all.into_inner()),
        [
            (b.search_id, "team-b".to_owned()),
            (a.search_id, "team-a".to_owned())
        ],
        "newest first"
    );
    let only_b = search.list_searches(list(OPS, "team-b")).await.unwrap();
    assert_eq!(
        ids(only_b.into_inner()),
        [(b.search_id, "team-b".to_owned())]
    );
    let other = search
        .list_searches(list(TEAM_A, "team-b"))
        .await
        .unwrap_err();
    assert_eq!(
        (other.code(), reason(&other).as_deref()),
        (Code::PermissionDenied, Some("ADMIN_TOKEN_REQUIRED"))
    );
    // Pages of one walk the whole list.
    let first = search
        .list_searches(with_token(
            pb::ListSearchesRequest {
                page_size: 1,
                ..Default::default()
            },
            OPS,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(first.searches[0].search_id, b.search_id);
    let second = search
        .list_searches(with_token(
            pb::ListSearchesRequest {
                page_size: 1,
                page_token: first.next_page_token,
                ..Default::default()
            },
            OPS,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(second.searches[0].search_id, a.search_id);
    assert!(second.next_page_token.is_empty(), "the last page");

    // The admin cancels team A's search; the ops snapshot shows both clients.
    let cancelled = search
        .cancel_search(with_token(
            pb::CancelSearchRequest {
                search_id: a.search_id,
            },
            OPS,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(cancelled.cancelled_queued, 1);
    // An admin sees every client; a client only itself
    // (a_client_sees_its_own_ops_figures_and_nothing_of_others).
    let snapshot = ops
        .get_ops(with_token(pb::GetOpsRequest {}, OPS))
        .await
        .unwrap()
        .into_inner();
    let mut seen: Vec<(String, i64, i64)> = snapshot
        .clients
        .iter()
        .map(|c| (c.client.clone(), c.searches_last_hour, c.active_searches))
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        [("team-a".to_owned(), 1, 0), ("team-b".to_owned(), 1, 1)]
    );
    running.shutdown().await;
}

#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn a_client_over_its_limits_is_told_when_to_come_back(pool: PgPool) {
    let running = start(
        &pool,
        &[
            "--client-rate-limits",
            "team-a=3/min",
            "--client-concurrency-limits",
            "team-b=1",
        ],
    )
    .await;
    let (mut search, _) = clients(&running).await;
    let get = |token: &str, id: i64| with_token(pb::GetSearchRequest { search_id: id }, token);
    let a = search
        .search(with_token(request(&[WATER], &[ALPHA], ""), TEAM_A))
        .await
        .unwrap()
        .into_inner();
    for _ in 0..2 {
        search.get_search(get(TEAM_A, a.search_id)).await.unwrap();
    }
    let searches = count(&pool, "select count(*) from search_request").await;
    let err = search
        .search(with_token(
            request(&["코카콜라 500ml 24개"], &[ALPHA], ""),
            TEAM_A,
        ))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    assert_eq!(reason(&err).as_deref(), Some("RATE_LIMITED"));
    assert_eq!(
        err.get_details_error_info().unwrap().metadata["client"],
        "team-a"
    );
    let retry = err
        .get_details_retry_info()
        .and_then(|r| r.retry_delay)
        .unwrap();
    assert!(
        retry > Duration::from_secs(5) && retry <= Duration::from_secs(20),
        "one call of 3/min comes back within 20 s: {retry:?}"
    );
    assert_eq!(
        count(&pool, "select count(*) from search_request").await,
        searches,
        "a refused Search stores nothing"
    );
    // Another client is not limited by team A's rate.
    let b = search
        .search(with_token(request(&[WATER], &[BETA], ""), TEAM_B))
        .await
        .unwrap()
        .into_inner();

    // Team B may have one call in progress: an open watch is one.
    let mut watch = search
        .watch_search(with_token(
            pb::WatchSearchRequest {
                search_id: b.search_id,
                after_version: 0,
            },
            TEAM_B,
        ))
        .await
        .unwrap()
        .into_inner();
    assert!(watch.message().await.unwrap().is_some(), "the first status");
    let busy = search
        .get_search(get(TEAM_B, b.search_id))
        .await
        .unwrap_err();
    assert_eq!(
        (busy.code(), reason(&busy).as_deref()),
        (Code::ResourceExhausted, Some("TOO_MANY_CALLS"))
    );
    assert!(busy.get_details_retry_info().is_some());
    drop(watch);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match search.get_search(get(TEAM_B, b.search_id)).await {
            Ok(_) => break,
            Err(e) if e.code() == Code::ResourceExhausted => {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "the watch's place was not given back"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("{e:?}"),
        }
    }
    running.shutdown().await;
}

#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn price_history_comes_with_the_final_status_and_says_what_it_covers(pool: PgPool) {
    let running = start(&pool, &[]).await;
    let (mut search, _) = clients(&running).await;
    let history = |include_incomplete: bool| {
        with_token(
            pb::GetPriceHistoryRequest {
                product: Some(pb::Product {
                    code: String::new(),
                    name: WATER.into(),
                    ..Default::default()
                }),
                include_incomplete,
                ..Default::default()
            },
            TEAM_A,
        )
    };

    // Crawled at both malls: the entry is there as soon as the status is final.
    let first = search
        .search(with_token(request(&[WATER], &[ALPHA, BETA], ""), TEAM_A))
        .await
        .unwrap()
        .into_inner();
    let jobs = running.queue.claim("node-1", None, 10).await.unwrap();
    assert_eq!(jobs.len(), 2);
    let alpha = jobs.iter().find(|j| j.mall.as_str() == ALPHA).unwrap();
    let result = JobResult::found(alpha.lease, vec![offer(ALPHA, 12_000)]).unwrap();
    running
        .queue
        .complete_if_leased("node-1", &result)
        .await
        .unwrap();
    assert!(
        search
            .get_price_history(history(true))
            .await
            .unwrap()
            .into_inner()
            .entries
            .is_empty(),
        "no entry while a mall is still running"
    );
    let beta = jobs.iter().find(|j| j.mall.as_str() == BETA).unwrap();
    let result = JobResult::found(beta.lease, vec![offer(BETA, 11_000)]).unwrap();
    running
        .queue
        .complete_if_leased("node-1", &result)
        .await
        .unwrap();
    let status = search
        .get_search(with_token(
            pb::GetSearchRequest {
                search_id: first.search_id,
            },
            TEAM_A,
        ))
        .await
        .unwrap()
        .into_inner();
    assert!(status.r#final);
    assert_eq!(status.products[0].lowest.as_ref().unwrap().currency, "KRW");
    let entries = search
        .get_price_history(history(false))
        .await
        .unwrap()
        .into_inner()
        .entries;
    assert_eq!(
        entries.len(),
        1,
        "written with the final status: {entries:?}"
    );
    let e = &entries[0];
    assert_eq!(e.search_id, first.search_id);
    assert_eq!(
        (e.lowest_effective_price, e.lowest_mall.as_str()),
        (11_000, BETA)
    );
    assert_eq!(e.covered_malls, [ALPHA, BETA]);
    assert!(e.complete);
    assert_eq!(e.currency, "KRW");
    assert!(e.malls.iter().all(|m| !m.cached && m.observed_at.is_some()));
    assert_eq!(e.malls[0].shipping, pb::ShippingStatus::Free as i32);
    // Observed when the last mall's job finished, not when anyone swept.
    let finished =
        sqlx::query_scalar::<_, chrono::DateTime<chrono::Utc>>("select max(finished_at) from job")
            .fetch_one(&pool)
            .await
            .unwrap();
    let observed = e.observed_at.unwrap();
    assert_eq!(
        (observed.seconds, observed.nanos / 1000),
        (
            finished.timestamp(),
            i32::try_from(finished.timestamp_subsec_micros()).unwrap()
        )
    );
    // The node of an ended job stays on it.
    let job = search
        .get_job(with_token(
            pb::GetJobRequest {
                job_id: alpha.lease.job_id,
            },
            TEAM_A,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(job.node_id, "node-1");

    // A search answered from stored results alone adds nothing.
    let mut cached = request(&[WATER], &[ALPHA, BETA], "");
    cached.max_age = Some(prost_types::Duration {
        seconds: 3600,
        nanos: 0,
    });
    let cached = search
        .search(with_token(cached, TEAM_B))
        .await
        .unwrap()
        .into_inner();
    assert!(
        cached
            .items
            .iter()
            .all(|i| i.disposition == pb::Disposition::CachedResult as i32)
    );
    assert_eq!(count(&pool, "select count(*) from price_history").await, 1);

    // A search cancelled after one mall answered: an incomplete entry, shown only on
    // request, saying which mall answered.
    let second = search
        .search(with_token(request(&[WATER], &[ALPHA, BETA], ""), TEAM_A))
        .await
        .unwrap()
        .into_inner();
    let jobs = running.queue.claim("node-1", None, 10).await.unwrap();
    let alpha = jobs.iter().find(|j| j.mall.as_str() == ALPHA).unwrap();
    let result = JobResult::found(alpha.lease, vec![offer(ALPHA, 10_500)]).unwrap();
    running
        .queue
        .complete_if_leased("node-1", &result)
        .await
        .unwrap();
    search
        .cancel_search(with_token(
            pb::CancelSearchRequest {
                search_id: second.search_id,
            },
            TEAM_A,
        ))
        .await
        .unwrap();
    let complete_only = search
        .get_price_history(history(false))
        .await
        .unwrap()
        .into_inner()
        .entries;
    assert_eq!(complete_only.len(), 1);
    let all = search
        .get_price_history(history(true))
        .await
        .unwrap()
        .into_inner()
        .entries;
    assert_eq!(all.len(), 2, "{all:?}");
    let incomplete = &all[0];
    assert_eq!(incomplete.search_id, second.search_id);
    assert!(!incomplete.complete);
    assert_eq!(incomplete.covered_malls, [ALPHA]);
    assert_eq!(incomplete.lowest_effective_price, 10_500);
    running.shutdown().await;
}

/// Two transactions finishing the last two jobs of one product at the same moment: the
/// entry is written once, by whichever commits second (each alone saw the other running).
#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn concurrent_last_results_write_one_entry(pool: PgPool) {
    let running = start(&pool, &[]).await;
    let (mut search, _) = clients(&running).await;
    const ROUNDS: usize = 20;
    for round in 0..ROUNDS {
        let name = format!("{WATER} {round}");
        search
            .search(with_token(request(&[&name], &[ALPHA, BETA], ""), TEAM_A))
            .await
            .unwrap();
        let jobs = running.queue.claim("node-1", None, 10).await.unwrap();
        assert_eq!(jobs.len(), 2);
        let results: Vec<JobResult> = jobs
            .iter()
            .map(|j| JobResult::found(j.lease, vec![offer(j.mall.as_str(), 9_000)]).unwrap())
            .collect();
        // NB: a second queue (its own batches) keeps the two completions out of one batch,
        // so they commit in two transactions.
        let other = Queue::new(pool.clone(), QueueConfig::default());
        let (x, y) = tokio::join!(
            running.queue.complete_if_leased("node-1", &results[0]),
            other.complete_if_leased("node-1", &results[1]),
        );
        x.unwrap();
        y.unwrap();
    }
    assert_eq!(
        count(&pool, "select count(*) from price_history").await,
        ROUNDS as i64,
        "one entry per product, none lost to the race"
    );
    running.shutdown().await;
}

/// `lpsctl job` as an event history: each run with its node, times, how it ended, its error
/// and the page it failed on; the trace id; the next retry while one is due.
#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn a_job_shows_every_run_with_its_node_error_and_evidence(pool: PgPool) {
    let running = start(&pool, &[]).await;
    let (mut search, _) = clients(&running).await;
    let mut req = with_token(request(&[WATER], &[ALPHA], ""), TEAM_A);
    req.metadata_mut().insert(
        "traceparent",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
            .parse()
            .unwrap(),
    );
    let accepted = search.search(req).await.unwrap().into_inner();
    let job_id = accepted.items[0].job_id;

    // The first run fails on a blocked page that the node kept.
    let first = running.queue.claim("node-1", None, 1).await.unwrap();
    let mut failure = JobFailure::new(first[0].lease, ErrorClass::Network, "the mall hung up");
    failure.evidence = Some(PageEvidence::new(
        "http://127.0.0.1:18081/search?q=water",
        "잠시만요",
        "captcha",
        "<html><body>captcha</body></html>",
        vec![0xFF, 0xD8, 0xFF, 0xD9],
        chrono::Utc::now(),
    ));
    running
        .queue
        .fail_if_leased("node-1", &failure)
        .await
        .unwrap();
    let get = |id| with_token(pb::GetJobRequest { job_id: id }, TEAM_A);
    let queued = search.get_job(get(job_id)).await.unwrap().into_inner();
    assert_eq!(queued.state, pb::JobState::Queued as i32);
    assert!(queued.next_retry_at.is_some(), "the backoff's end is shown");
    assert_eq!(queued.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(queued.runs.len(), 1);
    let run = &queued.runs[0];
    assert_eq!(
        (run.lease_epoch, run.node_id.as_str(), run.ended),
        (1, "node-1", pb::AttemptEnd::Failed as i32)
    );
    assert_eq!(run.error_class, pb::ErrorClass::Network as i32);
    assert_eq!(run.error, "the mall hung up");
    assert!(run.started_at.is_some() && run.ended_at.is_some());
    let evidence = run.evidence.as_ref().unwrap();
    assert_eq!(
        (evidence.marker.as_str(), evidence.title.as_str()),
        ("captcha", "잠시만요")
    );
    assert_eq!(evidence.screenshot_jpeg, [0xFF, 0xD8, 0xFF, 0xD9]);

    // The second run (after the backoff) is done on another node.
    let later = running
        .queue
        .at(chrono::Utc::now() + chrono::Duration::hours(1));
    let second = later.claim("node-2", None, 1).await.unwrap();
    assert_eq!(second[0].lease.job_id, job_id);
    let result = JobResult::found(second[0].lease, vec![offer(ALPHA, 12_900)]).unwrap();
    later.complete_if_leased("node-2", &result).await.unwrap();
    let done = search.get_job(get(job_id)).await.unwrap().into_inner();
    assert_eq!(done.runs.len(), 2);
    assert_eq!(
        (
            done.runs[1].node_id.as_str(),
            done.runs[1].ended,
            done.runs[1].evidence.is_none()
        ),
        ("node-2", pb::AttemptEnd::Done as i32, true)
    );
    assert_eq!(done.node_id, "node-2", "the node of the last run stays");
    assert!(done.next_retry_at.is_none());

    // What lpsctl shows of it: the history, and the evidence written out.
    let dir = common::TempDir::new("evidence");
    let written = lps_cli::evidence::write(&dir.0, &done).unwrap();
    assert_eq!(written, [dir.0.join(format!("job-{job_id}-run-1"))]);
    let text = lps_cli::text::job(&done);
    assert!(
        text.contains("runs:") && text.contains("2 (1 failed of 3 allowed"),
        "{text}"
    );
    assert!(
        text.contains("trace:") && text.contains("4bf92f3577b34da6a3ce929d0e0e4736"),
        "{text}"
    );
    let rows: Vec<&str> = text.lines().filter(|l| l.contains("node-")).collect();
    assert!(
        rows.iter()
            .any(|l| l.contains("node-1") && l.contains("failed") && l.contains("captcha")),
        "{text}"
    );
    assert!(
        rows.iter()
            .any(|l| l.contains("node-2") && l.contains("done")),
        "{text}"
    );
    let html = std::fs::read_to_string(dir.0.join(format!("job-{job_id}-run-1.html"))).unwrap();
    assert!(html.contains("captcha"));
    assert!(dir.0.join(format!("job-{job_id}-run-1.jpg")).exists());
    running.shutdown().await;
}

/// A product with a code.
fn coded(code: &str, name: &str) -> pb::Product {
    pb::Product {
        code: code.into(),
        name: name.into(),
        ..Default::default()
    }
}

fn search_of(products: Vec<pb::Product>, malls: &[&str]) -> pb::SearchRequest {
    pb::SearchRequest {
        products,
        malls: malls.iter().map(|m| (*m).to_owned()).collect(),
        ..Default::default()
    }
}

/// A search of `products` on `malls` by the client of `token`, answered OK.
async fn search_as(
    client: &mut SearchServiceClient<Channel>,
    products: Vec<pb::Product>,
    malls: &[&str],
    token: &str,
) -> pb::SearchResponse {
    client
        .search(with_token(search_of(products, malls), token))
        .await
        .unwrap()
        .into_inner()
}

fn history_of(code: &str, client: &str) -> pb::GetPriceHistoryRequest {
    pb::GetPriceHistoryRequest {
        product: Some(coded(code, "")),
        client: client.into(),
        include_incomplete: true,
        ..Default::default()
    }
}

/// Finishes every queued job found at `price` + the job's index in the claim.
async fn finish_all(queue: &Queue, price: impl Fn(&str) -> i64) -> Vec<String> {
    let jobs = queue.claim("node-1", None, 50).await.unwrap();
    let mut names = Vec::new();
    for job in &jobs {
        let offer = Offer {
            title: job.product_name.clone(),
            ..offer(job.mall.as_str(), price(&job.product_name))
        };
        let result = JobResult::found(job.lease, vec![offer]).unwrap();
        queue.complete_if_leased("node-1", &result).await.unwrap();
        names.push(job.product_name.clone());
    }
    names
}

/// Two clients whose catalogs use one code for different products (each through its own
/// coordinator replica): two crawls, each of its client's name, two histories, and
/// neither client sees the other's; an admin sees both, or one client's.
#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn one_code_of_two_clients_is_two_products(pool: PgPool) {
    const RAMEN: &str = "농심 신라면 120g x 5";
    let first = start(&pool, &[]).await;
    let second = start(&pool, &[]).await;
    let (mut a, _) = clients(&first).await;
    let (mut b, _) = clients(&second).await;
    let by_a = search_as(&mut a, vec![coded("SKU-1", WATER)], &[ALPHA], TEAM_A).await;
    let by_b = search_as(&mut b, vec![coded("SKU-1", RAMEN)], &[ALPHA], TEAM_B).await;
    assert_eq!(
        by_b.items[0].disposition,
        pb::Disposition::Queued as i32,
        "another product under the same code is its own crawl"
    );
    assert_ne!(by_a.items[0].job_id, by_b.items[0].job_id);
    let mut crawled = finish_all(
        &first.queue,
        |name| if name == WATER { 12_000 } else { 4_500 },
    )
    .await;
    crawled.sort();
    assert_eq!(
        crawled,
        [RAMEN, WATER],
        "each job searches its client's name"
    );

    // Each client's search shows its own product; each history holds its own entry.
    for (search, token, id, name, price) in [
        (&mut a, TEAM_A, by_a.search_id, WATER, 12_000),
        (&mut b, TEAM_B, by_b.search_id, RAMEN, 4_500),
    ] {
        let status = search
            .get_search(with_token(pb::GetSearchRequest { search_id: id }, token))
            .await
            .unwrap()
            .into_inner();
        let product = status.products[0].product.as_ref().unwrap();
        assert_eq!(
            (product.code.as_str(), product.name.as_str()),
            ("SKU-1", name)
        );
        let entries = search
            .get_price_history(with_token(history_of("SKU-1", ""), token))
            .await
            .unwrap()
            .into_inner()
            .entries;
        assert_eq!(entries.len(), 1, "{token}: {entries:?}");
        assert_eq!(entries[0].lowest_effective_price, price);
        assert_eq!(entries[0].search_id, id);
        assert_eq!(entries[0].product.as_ref().unwrap().name, name);
    }
    // A client may not read another's history; an admin reads both, or one client's.
    let refused = a
        .get_price_history(with_token(history_of("SKU-1", "team-b"), TEAM_A))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied);
    let all = a
        .get_price_history(with_token(history_of("SKU-1", ""), OPS))
        .await
        .unwrap()
        .into_inner()
        .entries;
    let mut owners: Vec<&str> = all.iter().map(|e| e.client.as_str()).collect();
    owners.sort_unstable();
    assert_eq!(owners, ["team-a", "team-b"]);
    let only_b = a
        .get_price_history(with_token(history_of("SKU-1", "team-b"), OPS))
        .await
        .unwrap()
        .into_inner()
        .entries;
    assert_eq!(only_b.len(), 1);
    assert_eq!(only_b[0].lowest_effective_price, 4_500);
    // And a client's GetJob shows its own product, never the other client's job.
    let missing = b
        .get_job(with_token(
            pb::GetJobRequest {
                job_id: by_a.items[0].job_id,
            },
            TEAM_B,
        ))
        .await
        .unwrap_err();
    assert_eq!(missing.code(), Code::NotFound);
    second.shutdown().await;
    first.shutdown().await;
}

/// Two clients asking for one product under their own codes (one of them spelling it
/// with other case and spacing), through two replicas: one crawl, and each client's own
/// history entry under its own code.
#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn one_product_of_two_clients_is_one_crawl_with_two_histories(pool: PgPool) {
    let first = start(&pool, &[]).await;
    let second = start(&pool, &[]).await;
    let (mut a, _) = clients(&first).await;
    let (mut b, _) = clients(&second).await;
    let by_a = search_as(&mut a, vec![coded("A-1", WATER)], &[ALPHA], TEAM_A).await;
    let by_b = search_as(
        &mut b,
        vec![coded("B-77", "제주  삼다수 2l X 12")],
        &[ALPHA],
        TEAM_B,
    )
    .await;
    assert_eq!(by_b.items[0].disposition, pb::Disposition::Joined as i32);
    assert_eq!(by_a.items[0].job_id, by_b.items[0].job_id);
    assert_eq!(
        finish_all(&first.queue, |_| 11_000).await.len(),
        1,
        "one crawl"
    );

    for (search, token, code, other) in [
        (&mut a, TEAM_A, "A-1", "B-77"),
        (&mut b, TEAM_B, "B-77", "A-1"),
    ] {
        let own = search
            .get_price_history(with_token(history_of(code, ""), token))
            .await
            .unwrap()
            .into_inner()
            .entries;
        assert_eq!(own.len(), 1, "{token}: {own:?}");
        assert_eq!(own[0].lowest_effective_price, 11_000);
        assert_eq!(own[0].product.as_ref().unwrap().code, code);
        let others = search
            .get_price_history(with_token(history_of(other, ""), token))
            .await
            .unwrap()
            .into_inner()
            .entries;
        assert!(
            others.is_empty(),
            "{token} sees {other}'s history: {others:?}"
        );
        // The shared job shows the caller's own product.
        let job = search
            .get_job(with_token(
                pb::GetJobRequest {
                    job_id: by_a.items[0].job_id,
                },
                token,
            ))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(job.product.unwrap().code, code);
    }
    second.shutdown().await;
    first.shutdown().await;
}

/// A client that re-sends a code with a new name: the code stays the identity (one
/// history), the new name is crawled from then on (not answered from the old name's
/// stored result), and each entry says which name was searched; an entry can be looked
/// up by its search.
#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn a_code_with_a_new_name_keeps_its_history_and_says_what_was_searched(pool: PgPool) {
    const RENAMED: &str = "제주 삼다수 그린 2L x 12";
    let running = start(&pool, &[]).await;
    let (mut search, _) = clients(&running).await;
    let mut ids = Vec::new();
    for (name, price) in [(WATER, 12_000), (RENAMED, 11_500)] {
        let mut req = search_of(vec![coded("SKU-7", name)], &[ALPHA]);
        req.max_age = Some(prost_types::Duration {
            seconds: 3600,
            nanos: 0,
        });
        let accepted = search
            .search(with_token(req, TEAM_A))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            accepted.items[0].disposition,
            pb::Disposition::Queued as i32,
            "{name}: crawled, not answered from another name's result"
        );
        assert_eq!(finish_all(&running.queue, |_| price).await, [name]);
        ids.push(accepted.search_id);
    }
    let entries = search
        .get_price_history(with_token(history_of("SKU-7", ""), TEAM_A))
        .await
        .unwrap()
        .into_inner()
        .entries;
    let seen: Vec<(&str, i64)> = entries
        .iter()
        .map(|e| {
            (
                e.product.as_ref().unwrap().name.as_str(),
                e.lowest_effective_price,
            )
        })
        .collect();
    assert_eq!(seen, [(RENAMED, 11_500), (WATER, 12_000)], "newest first");
    let one = search
        .get_price_history(with_token(
            pb::GetPriceHistoryRequest {
                search_id: ids[0],
                ..history_of("SKU-7", "")
            },
            TEAM_A,
        ))
        .await
        .unwrap()
        .into_inner()
        .entries;
    assert_eq!(one.len(), 1);
    assert_eq!(one[0].search_id, ids[0]);
    let bad = search
        .get_price_history(with_token(
            pb::GetPriceHistoryRequest {
                search_id: -3,
                ..history_of("SKU-7", "")
            },
            TEAM_A,
        ))
        .await
        .unwrap_err();
    assert_eq!(bad.code(), Code::InvalidArgument);
    assert!(bad.message().contains("search_id"), "{}", bad.message());
    running.shutdown().await;
}

/// GetOps for a client token is that client's own figures alone (its searches, the jobs
/// they wait for, its spend and its limits); an admin sees every client's.
#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn a_client_sees_its_own_ops_figures_and_nothing_of_others(pool: PgPool) {
    let running = start(
        &pool,
        &[
            "--client-rate-limits",
            "team-a=5/min",
            "--client-concurrency-limits",
            "team-a=4",
        ],
    )
    .await;
    let (mut search, mut ops) = clients(&running).await;
    search
        .search(with_token(request(&[WATER], &[ALPHA, BETA], ""), TEAM_A))
        .await
        .unwrap();
    search
        .search(with_token(
            request(&["농심 신라면 120g x 5"], &[ALPHA], ""),
            TEAM_B,
        ))
        .await
        .unwrap();
    // One of team-a's jobs runs and costs something.
    let claimed = running.queue.claim("node-1", None, 1).await.unwrap();
    let mut spent = false;
    for job in &claimed {
        if job.product_name == WATER {
            let mut result =
                JobResult::found(job.lease, vec![offer(job.mall.as_str(), 9_000)]).unwrap();
            result.metrics = lps_proto::model::JobMetrics {
                bytes_in: 1_000,
                cost_usd: 0.25,
                ..Default::default()
            };
            running
                .queue
                .complete_if_leased("node-1", &result)
                .await
                .unwrap();
            spent = true;
        }
    }

    let mine = ops
        .get_ops(with_token(pb::GetOpsRequest {}, TEAM_A))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(mine.scope_client, "team-a");
    assert_eq!(mine.clients.len(), 1, "{mine:?}");
    let a = &mine.clients[0];
    assert_eq!(a.client, "team-a");
    assert_eq!(a.searches_last_hour, 1);
    assert_eq!(a.queued_jobs + a.running_jobs, if spent { 1 } else { 2 });
    if spent {
        assert!((a.spend_usd_last_hour - 0.25).abs() < 1e-9, "{a:?}");
    }
    let limits = a.limits.as_ref().unwrap();
    assert_eq!(limits.rate_calls, 5);
    assert_eq!(limits.rate_per.as_ref().unwrap().seconds, 60);
    assert!(
        limits.rate_available > 3.0 && limits.rate_available < 4.5,
        "one call of five spent: {limits:?}"
    );
    assert_eq!(limits.max_calls_in_progress, 4);
    // Nothing of the deployment or of team-b.
    assert!(mine.jobs.is_empty() && mine.malls.is_empty() && mine.alerts.is_empty());
    assert_eq!((mine.nodes_connected, mine.proxy_ports_total), (0, 0));
    assert!(!format!("{mine:?}").contains("team-b"));

    let all = ops
        .get_ops(with_token(pb::GetOpsRequest {}, OPS))
        .await
        .unwrap()
        .into_inner();
    assert!(all.scope_client.is_empty());
    let mut names: Vec<&str> = all.clients.iter().map(|c| c.client.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["team-a", "team-b"]);
    let b = all.clients.iter().find(|c| c.client == "team-b").unwrap();
    assert_eq!(b.queued_jobs + b.running_jobs, 1);
    assert_eq!(
        b.limits.as_ref().unwrap().rate_calls,
        0,
        "team-b has no rate limit"
    );
    assert!(!all.jobs.is_empty(), "an admin sees the deployment");
    running.shutdown().await;
}
