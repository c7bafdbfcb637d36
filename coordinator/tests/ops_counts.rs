//! The ops snapshot's job counts (migration 0019: the final states from `job_tally`, kept
//! with the transitions) against the truth — `count(*)` over the job table — after every
//! kind of transition, with claimers, completions, failures and cancels running at once on
//! many connections, then RetryDead, deleted jobs and a truncated table.

use std::collections::HashMap;

use lps_coordinator::{
    db::MIGRATOR,
    queue::{EnqueueContext, MallLimits, Queue, QueueConfig},
    search::{RetryDeadFilter, Searches},
};
use lps_proto::model::{
    ErrorClass, JobFailure, JobResult, MallId, Offer, Priority, ProductSpec, SearchRequest,
    ShippingStatus,
};
use sqlx::{
    PgPool,
    postgres::{PgConnectOptions, PgPoolOptions},
};

const MALLS: [&str; 2] = ["testmall-alpha", "testmall-beta"];

/// `state → count(*)` over the job table.
async fn truth(pool: &PgPool) -> HashMap<String, i64> {
    sqlx::query_as::<_, (String, i64)>("select state::text, count(*) from job group by state")
        .fetch_all(pool)
        .await
        .unwrap()
        .into_iter()
        .collect()
}

/// The snapshot's counts, as `state → n` (zeros left out, like `truth`).
async fn snapshot(queue: &Queue) -> HashMap<String, i64> {
    let q = queue.ops().await.unwrap();
    [
        ("queued", q.queued),
        ("running", q.running),
        ("done", q.done),
        ("dead", q.dead),
        ("cancelled", q.cancelled),
    ]
    .into_iter()
    .filter(|(_, n)| *n > 0)
    .map(|(s, n)| (s.to_owned(), n))
    .collect()
}

async fn assert_counts_true(pool: &PgPool, queue: &Queue, when: &str) {
    let (said, is) = (snapshot(queue).await, truth(pool).await);
    assert_eq!(
        said, is,
        "after {when}: the snapshot says {said:?}, the table {is:?}"
    );
}

fn offer(mall: &MallId) -> Offer {
    Offer {
        mall: mall.clone(),
        title: "counted".into(),
        price: 1000,
        shipping_fee: 0,
        url: "http://127.0.0.1/p/1".into(),
        seller: "seller".into(),
        match_score: 0.9,
        shipping: ShippingStatus::Free,
        list_price: 0,
        flags: Vec::new(),
    }
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn the_snapshot_counts_follow_every_transition(_: PgPoolOptions, opts: PgConnectOptions) {
    let pool = PgPoolOptions::new()
        .max_connections(20)
        .connect_with(opts)
        .await
        .unwrap();
    let queue = Queue::new(pool.clone(), QueueConfig::default());
    for m in MALLS {
        queue
            .upsert_mall(&MallLimits::unlimited(MallId::new(m).unwrap()))
            .await
            .unwrap();
    }
    let names: Vec<String> = (0..400).map(|i| format!("counted product {i}")).collect();
    let mut search_ids = Vec::new();
    for chunk in names.chunks(100) {
        let request = SearchRequest::new(
            chunk
                .iter()
                .map(|n| ProductSpec::new(None, n).unwrap())
                .collect(),
            MALLS.iter().map(|m| MallId::new(*m).unwrap()).collect(),
            Priority::BATCH,
            None,
            None,
        )
        .unwrap();
        let accepted = queue
            .enqueue(&request, &EnqueueContext::default())
            .await
            .unwrap();
        search_ids.push(accepted.search_id);
    }
    assert_counts_true(&pool, &queue, "enqueue").await;

    // Eight claimers finish what they claim as found, not found, or a permanent failure
    // (dead), while a ninth task cancels two whole searches.
    let mut tasks = Vec::new();
    for c in 0..8 {
        let queue = queue.clone();
        tasks.push(tokio::spawn(async move {
            let node = format!("node-{c}");
            let mut n = 0u32;
            loop {
                let jobs = queue.claim(&node, None, 4).await.unwrap();
                if jobs.is_empty() {
                    break;
                }
                let mut results = Vec::new();
                for job in jobs {
                    n += 1;
                    match n % 3 {
                        0 => {
                            let failure =
                                JobFailure::new(job.lease, ErrorClass::Permanent, "no such page");
                            queue.fail_if_leased(&node, &failure).await.unwrap();
                        }
                        1 => results
                            .push(JobResult::found(job.lease, vec![offer(&job.mall)]).unwrap()),
                        _ => results.push(JobResult::not_found(job.lease)),
                    }
                }
                queue.complete_batch(&node, &results).await.unwrap();
            }
        }));
    }
    let searches = Searches::new(queue.clone());
    for &search_id in &search_ids[2..] {
        searches.cancel(search_id, None).await.unwrap();
    }
    for t in tasks {
        t.await.unwrap();
    }
    let states = truth(&pool).await;
    for state in ["done", "dead", "cancelled"] {
        assert!(
            states.get(state).copied().unwrap_or(0) > 0,
            "no {state} job: {states:?}"
        );
    }
    assert_counts_true(
        &pool,
        &queue,
        "concurrent claims, completions, failures, cancels",
    )
    .await;

    // Dead → queued, then claimed and finished again.
    let retried = searches
        .retry_dead(&RetryDeadFilter::default())
        .await
        .unwrap();
    assert!(!retried.is_empty());
    assert_counts_true(&pool, &queue, "RetryDead").await;
    loop {
        let jobs = queue.claim("node-retry", None, 16).await.unwrap();
        if jobs.is_empty() {
            break;
        }
        let results: Vec<JobResult> = jobs.iter().map(|j| JobResult::not_found(j.lease)).collect();
        queue.complete_batch("node-retry", &results).await.unwrap();
    }
    assert_counts_true(&pool, &queue, "the retried jobs finished").await;

    // Deleted (as retention deletes: the search's items first, then its jobs).
    sqlx::raw_sql(
        "delete from search_item where search_id = (select min(search_id) from search_request);
         delete from job j where not exists (select 1 from search_item si where si.job_id = j.job_id);",
    )
    .execute(&pool)
    .await
    .unwrap();
    assert_counts_true(&pool, &queue, "deleting a search's jobs").await;

    // A job written final by hand, and a truncated table.
    sqlx::query(
        "insert into job (dedupe_key, mall, product_name, product_key, priority, state,
                          outcome, finished_at)
         values ('by hand', 'testmall-alpha', 'by hand', 'name:by hand', 50, 'done', 'found',
                 now())",
    )
    .execute(&pool)
    .await
    .unwrap();
    assert_counts_true(&pool, &queue, "an insert of a done job").await;
    sqlx::raw_sql("truncate search_item, job cascade")
        .execute(&pool)
        .await
        .unwrap();
    assert_counts_true(&pool, &queue, "truncate").await;
}
