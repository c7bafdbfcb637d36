//! Retention sweeps against real PostgreSQL (`#[sqlx::test]`: a fresh, migrated database
//! per test): each rule deletes what is older than its age and keeps what a search or the
//! price history still needs; claims keep working while a sweep runs over many rows; and
//! two replicas never sweep at once. Rows are made old by backdating them with SQL.

use std::{
    collections::HashSet,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use lps_coordinator::{
    db::MIGRATOR,
    queue::{EnqueueContext, MallLimits, Queue, QueueConfig},
    retention::{self, Kind, RetentionConfig, Rule, SWEEP_LOCK, SweepReport},
};
use lps_proto::model::{
    ErrorClass, JobFailure, JobResult, MallId, Offer, Priority, ProductSpec, SearchRequest,
    ShippingStatus,
};
use sqlx::{PgPool, postgres::PgPoolOptions};
use tokio_util::sync::CancellationToken;

const ALPHA: &str = "testmall-alpha";
const DAY: Duration = Duration::from_secs(86_400);

fn mall(id: &str) -> MallId {
    MallId::new(id).unwrap()
}

async fn queue(pool: &PgPool) -> Queue {
    let queue = Queue::new(pool.clone(), QueueConfig::default());
    queue
        .upsert_mall(&MallLimits::unlimited(mall(ALPHA)))
        .await
        .unwrap();
    queue
}

/// Enqueues one search for `products` on alpha; returns its search id.
async fn search(queue: &Queue, products: &[&str]) -> i64 {
    let req = SearchRequest::new(
        products
            .iter()
            .map(|p| ProductSpec::new(None, p).unwrap())
            .collect(),
        vec![mall(ALPHA)],
        Priority::BATCH,
        None,
        None,
    )
    .unwrap();
    queue
        .enqueue(&req, &EnqueueContext::default())
        .await
        .unwrap()
        .search_id
}

fn offer(price: i64) -> Offer {
    Offer {
        mall: mall(ALPHA),
        title: "제주 삼다수 2L x 12".into(),
        price,
        shipping_fee: 0,
        url: format!("http://127.0.0.1/p/{price}"),
        seller: "seller".into(),
        match_score: 0.9,
        shipping: ShippingStatus::Free,
        list_price: 0,
        flags: Vec::new(),
    }
}

/// Claims every queued job of `product` and finishes it: found at `price`, not found
/// (`None`), or failed for good (`Some(0)`). Returns the job ids.
async fn finish(queue: &Queue, product: &str, price: Option<i64>) -> Vec<i64> {
    let mut ids = Vec::new();
    for job in queue.claim("node-1", None, 64).await.unwrap() {
        assert_eq!(job.product_name, product, "only {product} is queued");
        ids.push(job.lease.job_id);
        match price {
            Some(0) => {
                queue
                    .fail_if_leased(
                        "node-1",
                        &JobFailure::new(job.lease, ErrorClass::Permanent, "no profile"),
                    )
                    .await
                    .unwrap();
            }
            Some(p) => queue
                .complete_if_leased(
                    "node-1",
                    &JobResult::found(job.lease, vec![offer(p)]).unwrap(),
                )
                .await
                .unwrap(),
            None => queue
                .complete_if_leased("node-1", &JobResult::not_found(job.lease))
                .await
                .unwrap(),
        }
    }
    ids
}

async fn count(pool: &PgPool, sql: &str) -> i64 {
    sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(sql.to_owned()))
        .fetch_one(pool)
        .await
        .unwrap()
}

async fn exec(pool: &PgPool, sql: &str) {
    sqlx::query(sqlx::AssertSqlSafe(sql.to_owned()))
        .execute(pool)
        .await
        .unwrap();
}

fn config(rules: &[(Kind, Duration)], batch: u32) -> RetentionConfig {
    RetentionConfig {
        rules: rules
            .iter()
            .map(|&(kind, age)| Rule { kind, age })
            .collect(),
        interval: Duration::from_secs(600),
        batch,
    }
}

async fn sweep(pool: &PgPool, config: &RetentionConfig) -> SweepReport {
    retention::sweep(pool, config, &CancellationToken::new(), |_, _| {})
        .await
        .unwrap()
        .expect("no other sweep holds the lock")
}

/// Every row is 40 days old (searches, jobs, attempts, history, sessions, blocks).
async fn backdate_everything(pool: &PgPool) {
    exec(
        pool,
        "update search_request set created_at = created_at - interval '40 days'",
    )
    .await;
    exec(
        pool,
        "update job set finished_at = finished_at - interval '40 days',
                        created_at = created_at - interval '40 days'
         where finished_at is not null",
    )
    .await;
    exec(
        pool,
        "update price_history set observed_at = observed_at - interval '40 days'",
    )
    .await;
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn each_rule_deletes_what_is_old_and_keeps_what_is_needed(pool: PgPool) {
    let queue = queue(&pool).await;
    // An old found result, then a newer one of the same product and mall.
    search(&queue, &["water"]).await;
    let first = finish(&queue, "water", Some(12_000)).await;
    search(&queue, &["water"]).await;
    let newest = finish(&queue, "water", Some(11_000)).await;
    exec(
        &pool,
        &format!(
            "insert into stale_report (job_id, lease_epoch, node_id, kind) values ({}, 1, 'node-9', 'result')",
            first[0]
        ),
    )
    .await;
    // A dead job, a not-found job whose "not found" is still cached, an old search whose
    // job is running and one whose job is queued.
    search(&queue, &["broken"]).await;
    let dead = finish(&queue, "broken", Some(0)).await;
    search(&queue, &["missing"]).await;
    let not_found = finish(&queue, "missing", None).await;
    let running_search = search(&queue, &["running"]).await;
    let running = queue.claim("node-1", None, 64).await.unwrap();
    assert_eq!(running.len(), 1);
    let queued_search = search(&queue, &["queued"]).await;
    backdate_everything(&pool).await;
    // The old "water" and "broken" jobs' searches are 40 days old; the history entries
    // ("water" twice) too.
    assert_eq!(
        count(
            &pool,
            "select count(*) from price_history where product_key = 'name:water'"
        )
        .await,
        2
    );
    assert_eq!(count(&pool, "select count(*) from job_attempt").await, 4);

    // IP sessions and bot detections: one 10 days old, one fresh, each.
    exec(
        &pool,
        "insert into ip_session (host, port, mall, requests, ok, blocked, elapsed_ms, end_reason, ended_at)
         values ('gw', 10001, 'testmall-alpha', 3, 3, 0, 1000, 'budget', now() - interval '10 days'),
                ('gw', 10002, 'testmall-alpha', 3, 2, 1, 1000, 'block', now())",
    )
    .await;
    exec(
        &pool,
        "insert into bot_detection (mall, ip_request_no, detected_at)
         values ('testmall-alpha', 3, now() - interval '10 days'), ('testmall-alpha', 1, now())",
    )
    .await;

    // Jobs alone: every finished job still belongs to a kept search, so none goes (and no
    // delete trips over search_item's foreign key).
    let report = sweep(&pool, &config(&[(Kind::Jobs, 30 * DAY)], 100)).await;
    assert_eq!(report.deleted(Kind::Jobs), 0);

    let all = config(
        &[
            (Kind::Searches, 30 * DAY),
            (Kind::Jobs, 30 * DAY),
            (Kind::History, 30 * DAY),
            (Kind::IpSessions, 7 * DAY),
            (Kind::BotDetections, 7 * DAY),
        ],
        100,
    );
    let report = sweep(&pool, &all).await;
    // Final searches go; those with a running or a queued job stay.
    let searches: HashSet<i64> = sqlx::query_scalar("select search_id from search_request")
        .fetch_all(&pool)
        .await
        .unwrap()
        .into_iter()
        .collect();
    assert_eq!(searches, HashSet::from([running_search, queued_search]));
    assert_eq!(report.deleted(Kind::Searches), 4);
    // The older "water" result goes with its attempt, offer and stale report; the dead job
    // with its attempt. The newest found result, the cached "not found", and the running
    // and queued jobs stay.
    let jobs: HashSet<i64> = sqlx::query_scalar("select job_id from job")
        .fetch_all(&pool)
        .await
        .unwrap()
        .into_iter()
        .collect();
    let kept: HashSet<i64> = [newest[0], not_found[0], running[0].lease.job_id]
        .into_iter()
        .collect();
    assert!(kept.is_subset(&jobs), "{jobs:?}");
    assert!(
        !jobs.contains(&first[0]) && !jobs.contains(&dead[0]),
        "{jobs:?}"
    );
    assert_eq!(jobs.len(), 4, "the queued job stays too: {jobs:?}");
    assert_eq!(report.deleted(Kind::Jobs), 2);
    for table in ["job_attempt", "offer", "stale_report"] {
        let orphans = count(
            &pool,
            &format!("select count(*) from {table} t where not exists (select 1 from job j where j.job_id = t.job_id)"),
        )
        .await;
        assert_eq!(orphans, 0, "{table}");
    }
    assert_eq!(
        count(
            &pool,
            &format!("select count(*) from offer where job_id = {}", first[0])
        )
        .await,
        0
    );
    assert_eq!(count(&pool, "select count(*) from stale_report").await, 0);
    // The newest history entry of each product survives any age; the older "water" one
    // goes, and the kept entries lost their (deleted) search.
    assert_eq!(report.deleted(Kind::History), 1);
    let water: Vec<(i64, Option<i64>)> = sqlx::query_as(
        "select lowest_effective_price, search_id from price_history where product_key = 'name:water'",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(water, [(11_000, None)]);
    // Sessions and blocks older than 7 days go.
    assert_eq!(report.deleted(Kind::IpSessions), 1);
    assert_eq!(report.deleted(Kind::BotDetections), 1);
    assert_eq!(
        count(&pool, "select count(*) from ip_session where port = 10002").await,
        1
    );
    assert_eq!(count(&pool, "select count(*) from bot_detection").await, 1);

    // Once its "not found" has expired, that job goes too; the newest found result still
    // stays, and a second sweep finds nothing else.
    exec(
        &pool,
        "update negative_cache set created_at = now() - interval '2 days', expires_at = now() - interval '1 day'",
    )
    .await;
    let again = sweep(&pool, &all).await;
    assert_eq!(again.deleted(Kind::Jobs), 1);
    assert_eq!(again.total(), 1);
    assert_eq!(count(&pool, "select count(*) from negative_cache").await, 0);
    assert_eq!(
        count(
            &pool,
            &format!("select count(*) from job where job_id = {}", newest[0])
        )
        .await,
        1
    );
}

/// Delivered outbox rows go by their own age; a pending or dead one stays, and keeps its
/// search from the searches rule (the delivery would go with it).
#[sqlx::test(migrator = "MIGRATOR")]
async fn delivered_events_go_and_undelivered_ones_keep_their_search(pool: PgPool) {
    let queue = queue(&pool).await;
    let mut searches = Vec::new();
    for product in ["delivered", "pending", "dead"] {
        searches.push(search(&queue, &[product]).await);
        finish(&queue, product, None).await;
    }
    let (delivered, pending, dead) = (searches[0], searches[1], searches[2]);
    exec(
        &pool,
        &format!(
            "insert into delivery (search_id, search_version, destination, state, attempts,
                                   next_attempt_at, delivered_at)
             values ({delivered}, 1, 'old', 'delivered', 1, now(), now() - interval '10 days'),
                    ({delivered}, 1, 'fresh', 'delivered', 1, now(), now()),
                    ({pending}, 1, 'hook', 'pending', 0, now() + interval '1 hour', null),
                    ({dead}, 1, 'hook', 'dead', 12, now(), null)"
        ),
    )
    .await;
    backdate_everything(&pool).await;

    let report = sweep(&pool, &config(&[(Kind::Deliveries, 7 * DAY)], 100)).await;
    assert_eq!(report.deleted(Kind::Deliveries), 1);
    let left: Vec<String> = sqlx::query_scalar(
        "select destination || ':' || state from delivery order by search_id, destination",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(left, ["fresh:delivered", "hook:pending", "hook:dead"]);

    // Every search is 40 days old and final; only the one whose events were all delivered
    // goes (with its delivered event).
    let report = sweep(&pool, &config(&[(Kind::Searches, 30 * DAY)], 100)).await;
    assert_eq!(report.deleted(Kind::Searches), 1);
    let kept: HashSet<i64> = sqlx::query_scalar("select search_id from search_request")
        .fetch_all(&pool)
        .await
        .unwrap()
        .into_iter()
        .collect();
    assert_eq!(kept, HashSet::from([pending, dead]));
    assert_eq!(count(&pool, "select count(*) from delivery").await, 2);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn history_is_thinned_to_one_entry_per_product_mall_and_day(pool: PgPool) {
    // Product p: on day -100 three alpha entries (the complete 10:00 one is the day's) and
    // one beta entry; on day -99 one; and a fresh one. Product q: one old entry only.
    exec(
        &pool,
        "insert into price_history (product_key, client, observed_at, lowest_effective_price, lowest_mall, malls, complete)
         select k, '', date_trunc('day', now(), 'UTC') - d * interval '1 day' + h * interval '1 hour',
                price, m, '[]', c
         from (values ('p', 100, 8, 1000, 'alpha', true),
                      ('p', 100, 10, 1001, 'alpha', true),
                      ('p', 100, 12, 1002, 'alpha', false),
                      ('p', 100, 9, 1003, 'beta', false),
                      ('p', 99, 10, 1004, 'alpha', false),
                      ('p', 0, 0, 1005, 'alpha', true),
                      ('q', 100, 10, 2000, 'alpha', false),
                      ('q', 100, 11, 2001, 'alpha', false)) v(k, d, h, price, m, c)",
    )
    .await;
    let report = sweep(&pool, &config(&[(Kind::HistoryThin, 30 * DAY)], 1)).await;
    let left: Vec<i64> = sqlx::query_scalar(
        "select lowest_effective_price from price_history order by lowest_effective_price",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    // Batches of one row each still find every victim (the cursor moves past kept rows).
    assert_eq!(left, [1001, 1003, 1004, 1005, 2001]);
    assert_eq!(report.deleted(Kind::HistoryThin), 3);
}

/// Inserts `n` finished jobs (not found) 40 days old, each with an attempt, and no search.
async fn old_jobs(pool: &PgPool, n: i64) {
    exec(
        pool,
        &format!(
            "with j as (
                 insert into job (dedupe_key, mall, product_name, product_key, state, priority,
                                  outcome, finished_at, created_at)
                 select 'testmall-alpha|name:old' || i, 'testmall-alpha', 'old' || i, 'name:old' || i,
                        'done', 50, 'not_found', now() - interval '40 days', now() - interval '41 days'
                 from generate_series(1, {n}) i
                 returning job_id)
             insert into job_attempt (job_id, lease_epoch, node_id, ended_at, ended)
             select job_id, 1, 'node-old', now() - interval '40 days', 'done' from j"
        ),
    )
    .await;
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn claims_keep_working_while_a_sweep_deletes_many_rows(pool: PgPool) {
    const OLD: i64 = 20_000;
    let queue = queue(&pool).await;
    old_jobs(&pool, OLD).await;
    let stop = Arc::new(AtomicBool::new(false));
    // A node's loop: enqueue, claim, complete, as fast as it goes, until the sweep ended.
    let claimer = {
        let (queue, stop) = (queue.clone(), stop.clone());
        tokio::spawn(async move {
            let mut claimed = Vec::new();
            let mut round = 0;
            while !stop.load(Ordering::Relaxed) || round < 20 {
                let name = format!("fresh{round}");
                search(&queue, &[&name]).await;
                let jobs = queue.claim("node-1", None, 8).await.expect("claim failed");
                assert!(!jobs.is_empty(), "round {round} claimed nothing");
                for job in jobs {
                    claimed.push(job.lease.job_id);
                    queue
                        .complete_if_leased("node-1", &JobResult::not_found(job.lease))
                        .await
                        .expect("complete failed");
                }
                round += 1;
            }
            claimed
        })
    };
    let started = std::time::Instant::now();
    let report = sweep(
        &pool,
        &config(&[(Kind::Searches, 30 * DAY), (Kind::Jobs, 30 * DAY)], 500),
    )
    .await;
    stop.store(true, Ordering::Relaxed);
    let claimed = claimer.await.unwrap();
    eprintln!(
        "swept {} jobs in {:?} while {} jobs were claimed",
        report.deleted(Kind::Jobs),
        started.elapsed(),
        claimed.len()
    );
    assert_eq!(report.deleted(Kind::Jobs), OLD as u64);
    assert_eq!(
        count(
            &pool,
            "select count(*) from job where product_name like 'old%'"
        )
        .await,
        0
    );
    assert_eq!(
        count(
            &pool,
            "select count(*) from job_attempt where node_id = 'node-old'"
        )
        .await,
        0
    );
    // Every claimed job is still there, finished.
    let present: i64 =
        sqlx::query_scalar("select count(*) from job where job_id = any($1) and state = 'done'")
            .bind(&claimed)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(present, claimed.len() as i64);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn two_replicas_never_sweep_at_once(pool: PgPool) {
    queue(&pool).await;
    old_jobs(&pool, 50).await;
    let jobs = config(&[(Kind::Searches, 30 * DAY), (Kind::Jobs, 30 * DAY)], 1);

    // Another replica's sweep holds the lock: this one skips its round.
    let mut other = pool.acquire().await.unwrap();
    sqlx::query("select pg_advisory_lock($1)")
        .bind(SWEEP_LOCK)
        .execute(&mut *other)
        .await
        .unwrap();
    let skipped = retention::sweep(&pool, &jobs, &CancellationToken::new(), |_, _| {})
        .await
        .unwrap();
    assert!(skipped.is_none());
    assert_eq!(count(&pool, "select count(*) from job").await, 50);
    sqlx::query("select pg_advisory_unlock($1)")
        .bind(SWEEP_LOCK)
        .execute(&mut *other)
        .await
        .unwrap();
    drop(other);

    // A sweep that is running (held at its first batch, on a runtime of its own) keeps a
    // second one out until it ends and releases the lock.
    let (at_batch, batch_seen) = std::sync::mpsc::channel::<()>();
    let (go, wait_go) = std::sync::mpsc::channel::<()>();
    let options = pool.connect_options().as_ref().clone();
    let first = std::thread::spawn({
        let jobs = jobs.clone();
        move || {
            tokio::runtime::Runtime::new()
                .unwrap()
                .block_on(async move {
                    let own = PgPoolOptions::new()
                        .max_connections(2)
                        .connect_with(options)
                        .await
                        .unwrap();
                    let mut held = false;
                    retention::sweep(&own, &jobs, &CancellationToken::new(), |_, _| {
                        if !held {
                            held = true;
                            at_batch.send(()).unwrap();
                            wait_go.recv().unwrap();
                        }
                    })
                    .await
                    .unwrap()
                })
        }
    });
    tokio::task::spawn_blocking(move || batch_seen.recv().unwrap())
        .await
        .unwrap();
    let second = retention::sweep(&pool, &jobs, &CancellationToken::new(), |_, _| {})
        .await
        .unwrap();
    assert!(second.is_none(), "a second sweep ran beside the first");
    go.send(()).unwrap();
    let first = tokio::task::spawn_blocking(move || first.join().unwrap())
        .await
        .unwrap()
        .expect("the first sweep held the lock");
    assert_eq!(first.deleted(Kind::Jobs), 50);
    // The lock was given back.
    let after = retention::sweep(&pool, &jobs, &CancellationToken::new(), |_, _| {})
        .await
        .unwrap();
    assert_eq!(after.map(|r| r.total()), Some(0));
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_cancelled_sweep_stops_between_batches(pool: PgPool) {
    queue(&pool).await;
    old_jobs(&pool, 30).await;
    let cancel = CancellationToken::new();
    let mut batches = 0;
    let report = retention::sweep(
        &pool,
        &config(&[(Kind::Searches, 30 * DAY), (Kind::Jobs, 30 * DAY)], 10),
        &cancel,
        |kind, _| {
            if kind == Kind::Jobs {
                batches += 1;
                cancel.cancel();
            }
        },
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(batches, 1);
    assert_eq!(report.deleted(Kind::Jobs), 10);
    assert_eq!(count(&pool, "select count(*) from job").await, 20);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_schedules_current_run_and_its_observations_stay(pool: PgPool) {
    let queue = queue(&pool).await;
    let earlier = search(&queue, &["삼다수 2L"]).await;
    finish(&queue, "삼다수 2L", Some(9_000)).await;
    let current = search(&queue, &["삼다수 2L"]).await;
    finish(&queue, "삼다수 2L", Some(8_000)).await;
    exec(
        &pool,
        &format!(
            "insert into schedule (client, request_digest, products, interval_ms, priority,
                                   next_run_at, run_number, evaluated_run, last_search_id,
                                   last_run_at)
             values ('tests', 'd', '[{{\"code\": null, \"name\": \"삼다수 2L\"}}]', 60000,
                     50, now(), 2, 1, {current}, now())"
        ),
    )
    .await;
    exec(
        &pool,
        &format!(
            "insert into schedule_observation (schedule_id, product_index, run_number,
                                               search_id, lowest_effective_price, observed_at)
             select schedule_id, 0, 1, {earlier}, 9000, now() - interval '40 days'
             from schedule"
        ),
    )
    .await;
    backdate_everything(&pool).await;
    let all = config(
        &[
            (Kind::Searches, 30 * DAY),
            (Kind::Jobs, 30 * DAY),
            (Kind::History, 30 * DAY),
        ],
        100,
    );
    // The earlier run's search goes; the current one, not yet evaluated, stays with its
    // jobs, and so does the observation its evaluation compares with.
    let report = sweep(&pool, &all).await;
    assert_eq!(report.deleted(Kind::Searches), 1);
    let kept: Vec<i64> = sqlx::query_scalar("select search_id from search_request")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(kept, [current]);
    assert_eq!(
        count(
            &pool,
            &format!("select count(*) from search_item where search_id = {current}")
        )
        .await,
        1
    );
    assert_eq!(
        count(&pool, "select count(*) from schedule_observation").await,
        1
    );
    // Once the schedule has moved on (or is gone), its old run's search is like any other.
    exec(&pool, "delete from schedule").await;
    let report = sweep(&pool, &all).await;
    assert_eq!(report.deleted(Kind::Searches), 1);
    assert_eq!(count(&pool, "select count(*) from search_request").await, 0);
}

/// `node_session`: a row per node id ever seen, and pods bring new ids. Rows whose stream
/// ended (or was last seen, under a coordinator that crashed) longer ago than the age go,
/// in batches; a live stream's row and a recently ended one stay, and a node coming back
/// after its row went simply registers anew.
#[sqlx::test(migrator = "MIGRATOR")]
async fn node_sessions_ended_long_ago_are_deleted_and_live_ones_stay(pool: PgPool) {
    let row = |id: &str, seen: &str, ended: &str| {
        format!(
            "insert into node_session (node_id, session_id, coordinator_id, slots, free_slots,
                                       last_seen_at, disconnected_at)
             values ('{id}', gen_random_uuid(), 'c-1', 2, 2, {seen}, {ended})"
        )
    };
    exec(&pool, &row("live", "now()", "null")).await;
    exec(
        &pool,
        &row(
            "ended-recently",
            "now() - interval '2 hours'",
            "now() - interval '1 hour'",
        ),
    )
    .await;
    for i in 0..5 {
        exec(
            &pool,
            &row(
                &format!("ended-{i}"),
                "now() - interval '41 days'",
                "now() - interval '40 days'",
            ),
        )
        .await;
    }
    // A crashed coordinator's stream: never marked ended, not seen for 40 days.
    exec(&pool, &row("crashed", "now() - interval '40 days'", "null")).await;

    let report = sweep(&pool, &config(&[(Kind::NodeSessions, 30 * DAY)], 2)).await;
    assert_eq!(report.deleted(Kind::NodeSessions), 6, "{report:?}");
    let left: Vec<String> = sqlx::query_scalar("select node_id from node_session order by node_id")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(left, ["ended-recently", "live"]);
    // Nothing more to do, and a second sweep deletes nothing.
    let again = sweep(&pool, &config(&[(Kind::NodeSessions, 30 * DAY)], 2)).await;
    assert_eq!(again.deleted(Kind::NodeSessions), 0);

    // A node whose row went comes back: its Hello registers it anew.
    let stream = lps_coordinator::node_session::Stream {
        node_id: "ended-0",
        session_id: uuid::Uuid::new_v4(),
        coordinator_id: "c-2",
        version: "test",
        slots: 2,
        malls: &[],
        instance: Some("i-1"),
    };
    lps_coordinator::node_session::register(&pool, &stream)
        .await
        .unwrap();
    assert_eq!(
        count(&pool, "select count(*) from node_session where node_id = 'ended-0' and disconnected_at is null").await,
        1
    );
}
