//! Every queue transition against real PostgreSQL (`#[sqlx::test]`: a fresh, migrated
//! database per test). Counts come from the database, never from the claimers' own word.

use std::{collections::HashMap, time::Duration};

use chrono::{DateTime, TimeDelta, Utc};
use lps_coordinator::{
    db::MIGRATOR,
    queue::{
        ClaimedJob, Disposition, EnqueueContext, Error, JobListener, MallLimits, Queue, QueueConfig,
    },
};
use lps_proto::{
    model::{
        CardClass, ErrorClass, JobFailure, JobResult, JobState, Lease, MallId, Offer, Priority,
        ProductSpec, SearchRequest, ShippingStatus,
    },
    pb,
};
use sqlx::{
    PgPool,
    postgres::{PgConnectOptions, PgPoolOptions},
};
use tokio_util::sync::CancellationToken;

const MALL: &str = "testmall-alpha";

fn mall(id: &str) -> MallId {
    MallId::new(id).unwrap()
}

async fn queue_with(pool: &PgPool, config: QueueConfig, malls: &[&str]) -> Queue {
    let queue = Queue::new(pool.clone(), config);
    for m in malls {
        queue
            .upsert_mall(&MallLimits::unlimited(mall(m)))
            .await
            .unwrap();
    }
    queue
}

async fn queue(pool: &PgPool) -> Queue {
    queue_with(pool, QueueConfig::default(), &[MALL, "testmall-beta"]).await
}

fn search(products: &[&str], malls: &[&str], priority: Priority) -> SearchRequest {
    SearchRequest::new(
        products
            .iter()
            .map(|p| ProductSpec::new(None, p).unwrap())
            .collect(),
        malls.iter().map(|m| mall(m)).collect(),
        priority,
        None,
        None,
    )
    .unwrap()
}

/// Enqueues products `<prefix>0` … `<prefix><n - 1>` on `malls` as one batch search.
async fn enqueue_numbered(queue: &Queue, prefix: &str, n: usize, malls: &[&str]) {
    let names: Vec<String> = (0..n).map(|i| format!("{prefix}{i}")).collect();
    let products: Vec<&str> = names.iter().map(String::as_str).collect();
    queue
        .enqueue(
            &search(&products, malls, Priority::BATCH),
            &EnqueueContext::default(),
        )
        .await
        .unwrap();
}

/// An offer whose shipping was read: paid with a fee, else free.
fn offer(price: i64, shipping: i64) -> Offer {
    Offer {
        mall: mall(MALL),
        title: "제주 삼다수 2L x 12".into(),
        price,
        shipping_fee: shipping,
        url: "http://127.0.0.1/p/1".into(),
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
fn unknown_shipping(price: i64) -> Offer {
    Offer {
        shipping: ShippingStatus::Unknown,
        ..offer(price, 0)
    }
}

async fn db_now(pool: &PgPool) -> DateTime<Utc> {
    sqlx::query_scalar!(r#"select now() as "now!""#)
        .fetch_one(pool)
        .await
        .unwrap()
}

async fn job_state(pool: &PgPool, job_id: i64) -> (JobState, i64, i16, Option<ErrorClass>) {
    let r = sqlx::query!(
        r#"select state as "state: JobState", lease_epoch, attempts, error_class as "error_class: ErrorClass"
           from job where job_id = $1"#,
        job_id
    )
    .fetch_one(pool)
    .await
    .unwrap();
    (r.state, r.lease_epoch, r.attempts, r.error_class)
}

async fn count(pool: &PgPool, sql: &str) -> i64 {
    sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(sql.to_owned()))
        .fetch_one(pool)
        .await
        .unwrap()
}

/// A pool big enough for many concurrent claimers (the default test pool has 5).
async fn big_pool(opts: PgConnectOptions, size: u32) -> PgPool {
    PgPoolOptions::new()
        .max_connections(size)
        .connect_with(opts)
        .await
        .unwrap()
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn sixteen_claimers_drain_5000_jobs_exactly_once(_: PgPoolOptions, opts: PgConnectOptions) {
    let pool = big_pool(opts, 20).await;
    let queue = queue(&pool).await;
    let names: Vec<String> = (0..5000).map(|i| format!("product {i}")).collect();
    for chunk in names.chunks(200) {
        let products: Vec<&str> = chunk.iter().map(String::as_str).collect();
        let accepted = queue
            .enqueue(
                &search(&products, &[MALL], Priority::BATCH),
                &EnqueueContext::default(),
            )
            .await
            .unwrap();
        assert!(
            accepted
                .items
                .iter()
                .all(|i| i.disposition == Disposition::Queued)
        );
    }
    assert_eq!(
        count(&pool, "select count(*) from job where state = 'queued'").await,
        5000
    );

    let mut tasks = Vec::new();
    for c in 0..16 {
        let queue = queue.clone();
        tasks.push(tokio::spawn(async move {
            let node = format!("node-{c}");
            loop {
                let jobs = queue.claim(&node, None, 4).await.unwrap();
                if jobs.is_empty() {
                    break;
                }
                let results: Vec<JobResult> = jobs
                    .iter()
                    .map(|j| JobResult::found(j.lease, vec![offer(1000, 0)]).unwrap())
                    .collect();
                let applied = queue.complete_batch(&node, &results).await.unwrap();
                assert!(applied.iter().all(|(_, ok)| *ok));
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }

    assert_eq!(
        count(&pool, "select count(*) from job where state = 'done'").await,
        5000
    );
    assert_eq!(
        count(&pool, "select count(*) from job where lease_epoch <> 1").await,
        0,
        "a job was claimed twice"
    );
    assert_eq!(
        count(
            &pool,
            "select count(*) from job_attempt where ended = 'done'"
        )
        .await,
        5000
    );
    assert_eq!(
        count(&pool, "select count(*) from (select job_id from job_attempt group by job_id having count(*) > 1) d").await,
        0,
        "a job ran twice"
    );
    assert_eq!(count(&pool, "select count(*) from offer").await, 5000);
    assert_eq!(
        count(&pool, "select count(distinct node_id) from job_attempt").await,
        16
    );
    assert_eq!(count(&pool, "select count(*) from stale_report").await, 0);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn stale_completion_after_reclaim_is_rejected(pool: PgPool) {
    let queue = queue(&pool).await;
    let accepted = queue
        .enqueue(
            &search(&["삼다수 2L x 12"], &[MALL], Priority::INTERACTIVE),
            &EnqueueContext::default(),
        )
        .await
        .unwrap();
    let job_id = accepted.items[0].job_id;

    let first = queue.claim("node-a", None, 1).await.unwrap().remove(0);
    assert_eq!(first.lease, Lease { job_id, epoch: 1 });
    // node-a's stream is gone past its grace period: the job is taken back.
    let released = queue.release_node("node-a", &[]).await.unwrap();
    assert_eq!(released.len(), 1);
    assert_eq!(released[0].state, JobState::Queued);

    let second = queue.claim("node-b", None, 1).await.unwrap().remove(0);
    assert_eq!(second.lease, Lease { job_id, epoch: 2 });

    // node-a comes back with its old result: rejected, typed, and nothing changes.
    let late = JobResult::found(first.lease, vec![offer(1, 0)]).unwrap();
    let err = queue.complete_if_leased("node-a", &late).await.unwrap_err();
    assert!(
        matches!(err, Error::LeaseLost(l) if l == first.lease),
        "{err:?}"
    );
    let late_failure = JobFailure::new(first.lease, ErrorClass::Network, "late");
    assert!(matches!(
        queue.fail_if_leased("node-a", &late_failure).await,
        Err(Error::LeaseLost(_))
    ));
    assert!(
        queue
            .renew_if_leased("node-a", &[first.lease])
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        job_state(&pool, job_id).await,
        (JobState::Running, 2, 0, None)
    );
    assert_eq!(count(&pool, "select count(*) from offer").await, 0);
    assert_eq!(count(&pool, "select count(*) from stale_report").await, 2);

    // The current holder completes; a second completion of the same lease is stale too.
    let good = JobResult::found(second.lease, vec![offer(12_900, 3_000)]).unwrap();
    queue.complete_if_leased("node-b", &good).await.unwrap();
    assert!(matches!(
        queue.complete_if_leased("node-b", &good).await,
        Err(Error::LeaseLost(_))
    ));
    assert_eq!(job_state(&pool, job_id).await, (JobState::Done, 2, 0, None));
    let prices: Vec<i64> = sqlx::query_scalar!(
        "select effective_price as \"p!\" from offer where job_id = $1",
        job_id
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(prices, vec![15_900]);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_limit_set_by_another_replica_holds_before_this_one_rereads_the_limits(pool: PgPool) {
    // Replica A has read the malls (none limited: it claims through the lean statement).
    let a = queue(&pool).await;
    a.enqueue(
        &search(&["a", "b", "c"], &[MALL], Priority::BATCH),
        &EnqueueContext::default(),
    )
    .await
    .unwrap();
    let first = a.claim("node-a", None, 1).await.unwrap();
    assert_eq!(first.len(), 1);

    // Replica B caps the mall at 1: A's view of the limits is now stale.
    let b = Queue::new(pool.clone(), QueueConfig::default());
    b.upsert_mall(&MallLimits {
        max_running: Some(1),
        ..MallLimits::unlimited(mall(MALL))
    })
    .await
    .unwrap();
    // A's lean claim skips the now-limited mall instead of breaking its cap...
    assert!(
        a.claim("node-a", None, 2).await.unwrap().is_empty(),
        "a stale view of the limits claimed a capped mall's job"
    );
    // ...and once A re-reads the limits it claims within the cap: the first job (started
    // before the cap existed) holds no slot, so exactly one more may start.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(a.claim("node-a", None, 2).await.unwrap().len(), 1);
    assert!(a.claim("node-b", None, 2).await.unwrap().is_empty());
    assert_eq!(
        count(&pool, "select count(*) from job where state = 'running'").await,
        2
    );
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_completion_claims_the_next_job_in_its_own_transaction(pool: PgPool) {
    let queue = queue(&pool).await;
    // One slot on the mall: the next job can only start in the slot the completion frees.
    queue
        .upsert_mall(&MallLimits {
            max_running: Some(1),
            ..MallLimits::unlimited(mall(MALL))
        })
        .await
        .unwrap();
    let accepted = queue
        .enqueue(
            &search(&["a", "b", "c"], &[MALL], Priority::BATCH),
            &EnqueueContext::default(),
        )
        .await
        .unwrap();
    let ids: Vec<i64> = accepted.items.iter().map(|i| i.job_id).collect();
    let first = queue.claim("node-a", None, 1).await.unwrap().remove(0);
    assert!(
        queue.claim("node-b", None, 1).await.unwrap().is_empty(),
        "cap 1"
    );

    let found = JobResult::found(first.lease, vec![offer(12_900, 0)]).unwrap();
    // The same job twice in one report is refused, naming the second, and changes nothing.
    match queue
        .complete_batch("node-a", &[found.clone(), found.clone()])
        .await
    {
        Err(Error::InvalidArgument(f)) => assert_eq!(f.field, "results[1].job_id"),
        other => panic!("a job listed twice: {other:?}"),
    }
    assert_eq!(
        job_state(&pool, first.lease.job_id).await.0,
        JobState::Running
    );
    let done = queue
        .complete_and_claim("node-a", std::slice::from_ref(&found), None, 1)
        .await
        .unwrap();
    let (applied, next) = (done.applied, done.claimed);
    assert_eq!(applied, vec![(first.lease, true)]);
    assert_eq!(next.len(), 1, "the freed slot went to the next job");
    assert_ne!(next[0].lease.job_id, first.lease.job_id);
    assert_eq!(job_state(&pool, first.lease.job_id).await.0, JobState::Done);
    assert_eq!(
        job_state(&pool, next[0].lease.job_id).await.0,
        JobState::Running
    );
    assert_eq!(
        count(
            &pool,
            "select count(*) from mall_slot where job_id is not null"
        )
        .await,
        1
    );

    // The same report again is stale: nothing changes for it, and the claim part still
    // respects the cap (the one slot is taken).
    let done = queue
        .complete_and_claim("node-a", &[found], None, 1)
        .await
        .unwrap();
    let (applied, more) = (done.applied, done.claimed);
    assert_eq!(applied, vec![(first.lease, false)]);
    assert!(more.is_empty(), "the cap of 1 was exceeded");
    assert_eq!(count(&pool, "select count(*) from stale_report").await, 1);
    assert_eq!(count(&pool, "select count(*) from offer").await, 1);

    // No room to claim (n = 0): only the completion happens.
    let done = queue
        .complete_and_claim("node-a", &[JobResult::not_found(next[0].lease)], None, 0)
        .await
        .unwrap();
    let (applied, none) = (done.applied, done.claimed);
    assert_eq!(applied, vec![(next[0].lease, true)]);
    assert!(none.is_empty());
    let states: Vec<JobState> = sqlx::query_scalar("select state from job order by job_id")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(
        states,
        vec![JobState::Done, JobState::Done, JobState::Queued]
    );
    assert_eq!(ids.len(), 3);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn backoff_grows_and_ends_dead(pool: PgPool) {
    let config = QueueConfig {
        max_attempts: 4,
        backoff_base: Duration::from_secs(5),
        backoff_cap: Duration::from_secs(600),
        ..QueueConfig::default()
    };
    let queue = queue_with(&pool, config, &[MALL]).await;
    let job_id = queue
        .enqueue(
            &search(&["x"], &[MALL], Priority::INTERACTIVE),
            &EnqueueContext::default(),
        )
        .await
        .unwrap()
        .items[0]
        .job_id;
    let mut now = db_now(&pool).await;
    let mut delays = Vec::new();
    for attempt in 1..=4 {
        let q = queue.at(now);
        let job = q
            .claim("node", None, 1)
            .await
            .unwrap()
            .pop()
            .expect("claimable after backoff");
        assert_eq!(job.attempt, attempt);
        // Not claimable again while running or during backoff.
        let failed = q
            .fail_if_leased(
                "node",
                &JobFailure::new(job.lease, ErrorClass::Network, "connection reset"),
            )
            .await
            .unwrap();
        assert_eq!(failed.attempts, attempt);
        if attempt < 4 {
            assert_eq!(failed.state, JobState::Queued);
            let delay = (failed.run_after - now).to_std().unwrap();
            let full = Duration::from_secs(5 * 2u64.pow(attempt - 1));
            assert!(
                delay >= full / 2 && delay <= full,
                "attempt {attempt}: {delay:?} not in [{:?}, {full:?}]",
                full / 2
            );
            assert!(
                q.claim("node", None, 1).await.unwrap().is_empty(),
                "claimed during backoff"
            );
            delays.push(delay);
            now = failed.run_after;
        } else {
            assert_eq!(failed.state, JobState::Dead);
        }
    }
    assert!(
        delays.windows(2).all(|w| w[1] > w[0]),
        "backoff did not grow: {delays:?}"
    );
    let r = sqlx::query!(
        "select error_class::text as class, last_error, finished_at from job where job_id = $1",
        job_id
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(r.class.as_deref(), Some("network"));
    assert_eq!(r.last_error.as_deref(), Some("connection reset"));
    assert!(r.finished_at.is_some());

    // A class that cannot be helped by retrying is dead at once.
    let job_id = queue
        .enqueue(
            &search(&["y"], &[MALL], Priority::INTERACTIVE),
            &EnqueueContext::default(),
        )
        .await
        .unwrap()
        .items[0]
        .job_id;
    let job = queue.claim("node", None, 1).await.unwrap().remove(0);
    let failed = queue
        .fail_if_leased(
            "node",
            &JobFailure::new(job.lease, ErrorClass::PageBlocked, "burned 4 ips"),
        )
        .await
        .unwrap();
    assert_eq!(failed.state, JobState::Dead);
    assert_eq!(
        job_state(&pool, job_id).await.3,
        Some(ErrorClass::PageBlocked)
    );
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn reaper_returns_expired_leases_and_ends_deadline_overruns(pool: PgPool) {
    let config = QueueConfig {
        lease_ttl: Duration::from_secs(30),
        run_timeout: Duration::from_secs(300),
        ..QueueConfig::default()
    };
    let queue = queue_with(&pool, config, &[MALL]).await;
    queue
        .enqueue(
            &search(&["a", "b"], &[MALL], Priority::INTERACTIVE),
            &EnqueueContext::default(),
        )
        .await
        .unwrap();
    let t0 = db_now(&pool).await;
    let jobs = queue.at(t0).claim("node", None, 2).await.unwrap();
    let (silent, hung) = (jobs[0].lease, jobs[1].lease);
    assert_eq!(jobs[0].lease_until, t0 + TimeDelta::seconds(30));
    assert_eq!(jobs[0].deadline_at, t0 + TimeDelta::seconds(300));

    // Nothing to reap while leases are fresh.
    assert!(
        queue
            .at(t0 + TimeDelta::seconds(10))
            .reap()
            .await
            .unwrap()
            .is_empty()
    );

    // The node keeps heartbeating for `hung` only; `silent`'s lease runs out.
    for step in 1..=14 {
        let t = t0 + TimeDelta::seconds(20 * step);
        let renewed = queue.at(t).renew_if_leased("node", &[hung]).await.unwrap();
        assert_eq!(renewed.len(), 1);
        assert!(
            renewed[0].lease_until <= t0 + TimeDelta::seconds(300),
            "renewed past the deadline"
        );
        if t == t0 + TimeDelta::seconds(40) {
            let reaped = queue.at(t).reap().await.unwrap();
            assert_eq!(reaped.len(), 1);
            assert_eq!(
                (reaped[0].job_id, reaped[0].state, reaped[0].class),
                (silent.job_id, JobState::Queued, ErrorClass::LeaseExpired)
            );
        }
    }
    // Heartbeats cannot keep a hung job alive past its deadline.
    let at_deadline = t0 + TimeDelta::seconds(300);
    assert!(
        queue
            .at(at_deadline)
            .renew_if_leased("node", &[hung])
            .await
            .unwrap()
            .is_empty()
    );
    let ops = queue.at(at_deadline).ops().await.unwrap();
    assert_eq!(ops.stuck_running, 1);
    let reaped = queue.at(at_deadline).reap().await.unwrap();
    assert_eq!(reaped.len(), 1);
    assert_eq!(
        (reaped[0].job_id, reaped[0].class),
        (hung.job_id, ErrorClass::Deadline)
    );
    assert_eq!(
        job_state(&pool, hung.job_id).await,
        (JobState::Queued, 1, 1, Some(ErrorClass::Deadline))
    );
    let ops = queue.at(at_deadline).ops().await.unwrap();
    assert_eq!(ops.stuck_running, 0);
    assert_eq!(ops.deadline_kills_last_hour, 1);
    assert_eq!(ops.queued, 2);
    // The node's late report for the reaped lease is stale.
    let late = JobResult::not_found(hung);
    assert!(matches!(
        queue.complete_if_leased("node", &late).await,
        Err(Error::LeaseLost(_))
    ));
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn poison_job_that_keeps_losing_its_node_goes_dead(pool: PgPool) {
    let queue = queue(&pool).await;
    let job_id = queue
        .enqueue(
            &search(&["poison"], &[MALL], Priority::INTERACTIVE),
            &EnqueueContext::default(),
        )
        .await
        .unwrap()
        .items[0]
        .job_id;
    for round in 1..=3 {
        let node = format!("node-{round}");
        let job = queue.claim(&node, None, 1).await.unwrap().remove(0);
        assert_eq!(job.reclaims, round - 1);
        let released = queue.release_node(&node, &[]).await.unwrap();
        let expect = if round < 3 {
            JobState::Queued
        } else {
            JobState::Dead
        };
        assert_eq!(released[0].state, expect, "round {round}");
    }
    let (state, epoch, attempts, class) = job_state(&pool, job_id).await;
    assert_eq!(
        (state, epoch, attempts, class),
        (JobState::Dead, 3, 0, Some(ErrorClass::Poison)),
        "reclaims are not attempts"
    );
    assert!(queue.claim("node-4", None, 1).await.unwrap().is_empty());
}

/// Poison means the job, not the node: one node that takes a job and vanishes again and
/// again does not make it poison (and after its second drop the job waits a backoff, so
/// other nodes take it first); only runs ended on max_reclaims *different* nodes do. No
/// reclaim is an attempt.
#[sqlx::test(migrator = "MIGRATOR")]
async fn one_node_dropping_a_job_again_and_again_does_not_make_it_poison(pool: PgPool) {
    let queue = queue(&pool).await;
    let job_id = queue
        .enqueue(
            &search(&["dropped"], &[MALL], Priority::INTERACTIVE),
            &EnqueueContext::default(),
        )
        .await
        .unwrap()
        .items[0]
        .job_id;
    // The same node drops it five times (each retry claimed once its backoff is over).
    let mut t = chrono::Utc::now();
    for round in 1..=5 {
        let at = queue.at(t);
        let job = at.claim("bad-node", None, 1).await.unwrap();
        assert_eq!(job.len(), 1, "round {round}");
        let released = at.release_node("bad-node", &[]).await.unwrap();
        assert_eq!(released[0].state, JobState::Queued, "round {round}");
        let run_after: chrono::DateTime<chrono::Utc> =
            sqlx::query_scalar("select run_after from job where job_id = $1")
                .bind(job_id)
                .fetch_one(&pool)
                .await
                .unwrap();
        if round == 1 {
            assert!(run_after <= t, "the first drop requeues at once");
        } else {
            assert!(
                run_after > t,
                "round {round}: a repeat drop waits a backoff"
            );
            // Not claimable before it.
            assert!(
                queue
                    .at(t)
                    .claim("other", None, 1)
                    .await
                    .unwrap()
                    .is_empty()
            );
        }
        t = run_after.max(t) + chrono::TimeDelta::milliseconds(1);
    }
    let (state, _, attempts, class) = job_state(&pool, job_id).await;
    assert_eq!((state, attempts, class), (JobState::Queued, 0, None));

    // Two more nodes drop it: three different nodes, poison now.
    for node in ["node-b", "node-c"] {
        let at = queue.at(t);
        assert_eq!(at.claim(node, None, 1).await.unwrap().len(), 1, "{node}");
        at.release_node(node, &[]).await.unwrap();
        t += chrono::TimeDelta::milliseconds(1);
    }
    let (state, _, attempts, class) = job_state(&pool, job_id).await;
    assert_eq!(
        (state, attempts, class),
        (JobState::Dead, 0, Some(ErrorClass::Poison))
    );
    let error: String = sqlx::query_scalar("select last_error from job where job_id = $1")
        .bind(job_id)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(error, "ended the runs of 3 different nodes");
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn release_keeps_reattached_leases(pool: PgPool) {
    let queue = queue(&pool).await;
    queue
        .enqueue(
            &search(&["a", "b"], &[MALL], Priority::INTERACTIVE),
            &EnqueueContext::default(),
        )
        .await
        .unwrap();
    let jobs = queue.claim("node", None, 2).await.unwrap();
    let released = queue.release_node("node", &[jobs[0].lease]).await.unwrap();
    assert_eq!(
        released.iter().map(|r| r.job_id).collect::<Vec<_>>(),
        vec![jobs[1].lease.job_id]
    );
    assert_eq!(
        job_state(&pool, jobs[0].lease.job_id).await.0,
        JobState::Running
    );
    // A draining node hands a job back: no attempt, no reclaim.
    queue
        .hand_back_if_leased("node", jobs[0].lease)
        .await
        .unwrap();
    let r = sqlx::query!(
        "select attempts, reclaims, state::text as s from job where job_id = $1",
        jobs[0].lease.job_id
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(
        (r.attempts, r.reclaims, r.s.as_deref()),
        (0, 0, Some("queued"))
    );
    assert!(matches!(
        queue.hand_back_if_leased("node", jobs[0].lease).await,
        Err(Error::LeaseLost(_))
    ));
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn dedupe_joins_and_promotes_never_demotes(pool: PgPool) {
    let queue = queue(&pool).await;
    let ctx = EnqueueContext::default();
    let first = queue
        .enqueue(&search(&["콜라 500ml"], &[MALL], Priority::BATCH), &ctx)
        .await
        .unwrap();
    assert_eq!(first.items[0].disposition, Disposition::Queued);
    let job_id = first.items[0].job_id;

    // Same product (spacing and case differ), more urgent: joined and promoted.
    let second = queue
        .enqueue(
            &search(&["콜라  500ML"], &[MALL], Priority::INTERACTIVE),
            &ctx,
        )
        .await
        .unwrap();
    assert_eq!(
        (second.items[0].disposition, second.items[0].job_id),
        (Disposition::Joined, job_id)
    );
    let priority = || {
        sqlx::query_scalar!("select priority from job where job_id = $1", job_id).fetch_one(&pool)
    };
    assert_eq!(priority().await.unwrap(), 10);

    // Less urgent: joined, never demoted.
    let third = queue
        .enqueue(&search(&["콜라 500ml"], &[MALL], Priority::BACKFILL), &ctx)
        .await
        .unwrap();
    assert_eq!(
        (third.items[0].disposition, third.items[0].job_id),
        (Disposition::Joined, job_id)
    );
    assert_eq!(priority().await.unwrap(), 10);

    // The same product twice in one request, and a second mall: one job per (mall, product).
    let fourth = queue
        .enqueue(
            &search(
                &["사이다", "사이다", "콜라 500ml"],
                &[MALL, "testmall-beta"],
                Priority::BATCH,
            ),
            &ctx,
        )
        .await
        .unwrap();
    let d: Vec<_> = fourth
        .items
        .iter()
        .map(|i| (i.product_index, i.mall.as_str(), i.disposition))
        .collect();
    assert_eq!(
        d,
        vec![
            (0, MALL, Disposition::Queued),
            (0, "testmall-beta", Disposition::Queued),
            (1, MALL, Disposition::Joined),
            (1, "testmall-beta", Disposition::Joined),
            (2, MALL, Disposition::Joined),
            (2, "testmall-beta", Disposition::Queued),
        ]
    );
    assert_eq!(fourth.items[0].job_id, fourth.items[2].job_id);
    assert_eq!(fourth.items[4].job_id, job_id);
    assert_eq!(count(&pool, "select count(*) from job").await, 4);

    // A running job is joined too; once done, the next request makes a new job.
    let job = queue
        .claim("node", Some(&[mall(MALL)]), 1)
        .await
        .unwrap()
        .remove(0);
    assert_eq!(job.lease.job_id, job_id, "the promoted job runs first");
    let again = queue
        .enqueue(&search(&["콜라 500ml"], &[MALL], Priority::BATCH), &ctx)
        .await
        .unwrap();
    assert_eq!(
        (again.items[0].disposition, again.items[0].job_id),
        (Disposition::Joined, job_id)
    );
    queue
        .complete_if_leased(
            "node",
            &JobResult::found(job.lease, vec![offer(900, 0)]).unwrap(),
        )
        .await
        .unwrap();
    let after = queue
        .enqueue(&search(&["콜라 500ml"], &[MALL], Priority::BATCH), &ctx)
        .await
        .unwrap();
    assert_eq!(after.items[0].disposition, Disposition::Queued);
    assert_ne!(after.items[0].job_id, job_id);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn caches_answer_without_a_job_and_not_found_is_done(pool: PgPool) {
    let queue = queue(&pool).await;
    let ctx = EnqueueContext::default();
    let found_id = queue
        .enqueue(&search(&["삼다수"], &[MALL], Priority::INTERACTIVE), &ctx)
        .await
        .unwrap()
        .items[0]
        .job_id;
    let missing_id = queue
        .enqueue(
            &search(&["없는 상품"], &[MALL], Priority::INTERACTIVE),
            &ctx,
        )
        .await
        .unwrap()
        .items[0]
        .job_id;
    let jobs = queue.claim("node", None, 2).await.unwrap();
    for job in &jobs {
        let result = if job.lease.job_id == found_id {
            JobResult::found(job.lease, vec![offer(5000, 2500)]).unwrap()
        } else {
            JobResult::not_found(job.lease)
        };
        queue.complete_if_leased("node", &result).await.unwrap();
    }
    // not_found is a normal final outcome: done, never dead.
    let r = sqlx::query!(
        "select state::text as s, outcome::text as o from job where job_id = $1",
        missing_id
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(
        (r.s.as_deref(), r.o.as_deref()),
        (Some("done"), Some("not_found"))
    );

    let jobs_before = count(&pool, "select count(*) from job").await;
    let mut fresh = search(&["삼다수", "없는 상품"], &[MALL], Priority::INTERACTIVE);
    fresh.max_age = Some(Duration::from_secs(3600));
    let answered = queue.enqueue(&fresh, &ctx).await.unwrap();
    assert_eq!(
        answered
            .items
            .iter()
            .map(|i| (i.disposition, i.job_id))
            .collect::<Vec<_>>(),
        vec![
            (Disposition::CachedResult, found_id),
            (Disposition::CachedNotFound, missing_id)
        ]
    );
    assert_eq!(
        count(&pool, "select count(*) from job").await,
        jobs_before,
        "a cache answer made a job"
    );

    // Without max_age a found product is crawled again; "not found" is still remembered.
    let again = queue
        .enqueue(
            &search(&["삼다수", "없는 상품"], &[MALL], Priority::INTERACTIVE),
            &ctx,
        )
        .await
        .unwrap();
    assert_eq!(again.items[0].disposition, Disposition::Queued);
    assert_eq!(again.items[1].disposition, Disposition::CachedNotFound);

    // The negative cache expires after 24 h.
    let later = queue.at(db_now(&pool).await + TimeDelta::hours(25));
    let expired = later
        .enqueue(
            &search(&["없는 상품"], &[MALL], Priority::INTERACTIVE),
            &ctx,
        )
        .await
        .unwrap();
    assert_eq!(expired.items[0].disposition, Disposition::Queued);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn idempotency_key_replays_the_first_search(pool: PgPool) {
    let queue = queue(&pool).await;
    let mut req = search(&["a", "b"], &[MALL], Priority::INTERACTIVE);
    req.idempotency_key = Some("caller-42".into());
    let first = queue
        .enqueue(&req, &EnqueueContext::default())
        .await
        .unwrap();
    let second = queue
        .enqueue(&req, &EnqueueContext::default())
        .await
        .unwrap();
    assert!(!first.replayed && second.replayed);
    assert_eq!(first.search_id, second.search_id);
    assert_eq!(first.items, second.items);
    assert_eq!(count(&pool, "select count(*) from search_request").await, 1);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn cancel_ends_queued_and_running_jobs(pool: PgPool) {
    let queue = queue(&pool).await;
    let accepted = queue
        .enqueue(
            &search(&["a", "b"], &[MALL], Priority::INTERACTIVE),
            &EnqueueContext::default(),
        )
        .await
        .unwrap();
    let running = queue.claim("node", None, 1).await.unwrap().remove(0);
    let done = queue.cancel_search(accepted.search_id, None).await.unwrap();
    let mut cancelled = done.cancelled;
    cancelled.sort_by_key(|c| c.lease.job_id);
    assert_eq!((done.locked, cancelled.len()), (2, 2));
    let was_running = cancelled
        .iter()
        .find(|c| c.was == JobState::Running)
        .unwrap();
    assert_eq!(
        (was_running.lease, was_running.node.as_deref()),
        (running.lease, Some("node"))
    );
    assert!(matches!(
        queue
            .complete_if_leased("node", &JobResult::not_found(running.lease))
            .await,
        Err(Error::LeaseLost(_))
    ));
    assert_eq!(
        count(&pool, "select count(*) from job where state = 'cancelled'").await,
        2
    );
    let again = queue.cancel_search(accepted.search_id, None).await.unwrap();
    assert_eq!(
        (again.locked, again.cancelled.len()),
        (0, 0),
        "cancel is idempotent"
    );
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn bad_input_is_rejected_naming_the_field_and_nothing_is_stored(pool: PgPool) {
    let queue = queue(&pool).await;
    let product = |name: &str| pb::Product {
        code: String::new(),
        name: name.into(),
        ..Default::default()
    };
    let cases = [
        (pb::SearchRequest::default(), "products"),
        (
            pb::SearchRequest {
                products: vec![product(&"x".repeat(201))],
                ..Default::default()
            },
            "products[0].name",
        ),
        (
            pb::SearchRequest {
                products: vec![product("ok")],
                priority: Some(100),
                ..Default::default()
            },
            "priority",
        ),
        (
            pb::SearchRequest {
                products: vec![product("ok")],
                malls: vec!["BAD MALL".into()],
                ..Default::default()
            },
            "malls[0]",
        ),
    ];
    for (req, field) in cases {
        let err = SearchRequest::try_from(req).unwrap_err();
        assert_eq!(err.field, field, "{err}");
    }
    // Valid in shape but naming a mall the deployment does not have: rejected by the queue.
    let req = SearchRequest::try_from(pb::SearchRequest {
        products: vec![product("ok")],
        malls: vec![MALL.into(), "no-such-mall".into()],
        ..Default::default()
    })
    .unwrap();
    match queue.enqueue(&req, &EnqueueContext::default()).await {
        Err(Error::InvalidArgument(e)) => {
            assert_eq!(e.field, "malls[1]");
            assert!(e.reason.contains("no-such-mall"), "{e}");
        }
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    // A disabled mall is unknown to searches too.
    queue
        .upsert_mall(&MallLimits {
            enabled: false,
            ..MallLimits::unlimited(mall("testmall-beta"))
        })
        .await
        .unwrap();
    let req = search(&["ok"], &["testmall-beta"], Priority::BATCH);
    assert!(matches!(
        queue.enqueue(&req, &EnqueueContext::default()).await,
        Err(Error::InvalidArgument(_))
    ));
    for table in ["search_request", "search_item", "job"] {
        assert_eq!(
            count(&pool, &format!("select count(*) from {table}")).await,
            0,
            "{table} has rows"
        );
    }
}

/// Runs claimers against `limits` until `jobs` jobs are done; returns nothing, the
/// assertions read the database.
/// How the claimers of [`run_claimers`] finish a job.
#[derive(Clone, Copy)]
enum Finish {
    /// Complete, then claim again in a separate statement.
    Separately,
    /// Complete and claim the next job in one transaction (the node stream's path).
    WithNextClaim,
}

async fn run_claimers(
    queue: &Queue,
    claimers: usize,
    hold: Duration,
    malls: Vec<MallId>,
    finish: Finish,
) {
    let mut tasks = Vec::new();
    for c in 0..claimers {
        let queue = queue.clone();
        let malls = malls.clone();
        tasks.push(tokio::spawn(async move {
            let node = format!("node-{c}");
            let mut idle = 0;
            let mut jobs = Vec::new();
            while idle < 40 {
                if jobs.is_empty() {
                    jobs = queue.claim(&node, Some(&malls), 2).await.unwrap();
                }
                if jobs.is_empty() {
                    idle += 1;
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
                idle = 0;
                tokio::time::sleep(hold).await;
                let results: Vec<JobResult> = jobs
                    .drain(..)
                    .map(|j| JobResult::not_found(j.lease))
                    .collect();
                match finish {
                    Finish::Separately => {
                        for r in &results {
                            queue.complete_if_leased(&node, r).await.unwrap();
                        }
                    }
                    Finish::WithNextClaim => {
                        let done = queue
                            .complete_and_claim(&node, &results, Some(&malls), 2)
                            .await
                            .unwrap();
                        assert!(done.applied.iter().all(|(_, ok)| *ok), "{done:?}");
                        jobs = done.claimed;
                    }
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn per_mall_cap_holds_under_concurrent_claimers(_: PgPoolOptions, opts: PgConnectOptions) {
    per_mall_cap_holds(opts, Finish::Separately).await;
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn per_mall_cap_holds_when_completions_claim_the_next_job(
    _: PgPoolOptions,
    opts: PgConnectOptions,
) {
    per_mall_cap_holds(opts, Finish::WithNextClaim).await;
}

async fn per_mall_cap_holds(opts: PgConnectOptions, finish: Finish) {
    let pool = big_pool(opts, 12).await;
    let queue = queue(&pool).await;
    let capped = MallLimits {
        max_running: Some(3),
        ..MallLimits::unlimited(mall(MALL))
    };
    queue.upsert_mall(&capped).await.unwrap();
    enqueue_numbered(&queue, "p", 60, &[MALL, "testmall-beta"]).await;

    // A sampler watches the running count while 8 claimers work.
    let stop = CancellationToken::new();
    let sampler = {
        let pool = pool.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut max = 0;
            while !stop.is_cancelled() {
                let n: i64 = sqlx::query_scalar!(
                    "select count(*) as \"n!\" from job where mall = $1 and state = 'running'",
                    MALL
                )
                .fetch_one(&pool)
                .await
                .unwrap();
                max = max.max(n);
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            max
        })
    };
    run_claimers(
        &queue,
        8,
        Duration::from_millis(15),
        vec![mall(MALL), mall("testmall-beta")],
        finish,
    )
    .await;
    stop.cancel();
    let sampled_max = sampler.await.unwrap();
    assert!(sampled_max <= 3, "sampled {sampled_max} running > cap 3");
    assert_eq!(
        count(&pool, "select count(*) from job where state = 'done'").await,
        120
    );

    // Exact check from the recorded run intervals: never more than 3 overlapping.
    let runs = sqlx::query!(
        r#"select run_started_at as "s!", finished_at as "f!" from job where mall = $1"#,
        MALL
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let mut events: Vec<(DateTime<Utc>, i32)> =
        runs.iter().flat_map(|r| [(r.s, 1), (r.f, -1)]).collect();
    events.sort_by_key(|&(t, delta)| (t, delta)); // ends before starts at the same instant
    let (mut running, mut max) = (0, 0);
    for (_, delta) in events {
        running += delta;
        max = max.max(running);
    }
    assert!(max <= 3, "{max} runs overlapped > cap 3");
    assert!(
        max >= 2,
        "the cap was never approached ({max}); the test proves nothing"
    );
    // The uncapped mall ran more at once.
    assert_eq!(
        count(
            &pool,
            "select count(*) from mall_slot where job_id is not null"
        )
        .await,
        0,
        "a slot leaked"
    );
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn per_mall_start_gap_holds_under_concurrent_claimers(
    _: PgPoolOptions,
    opts: PgConnectOptions,
) {
    per_mall_start_gap_holds(opts, Finish::Separately).await;
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn per_mall_start_gap_holds_when_completions_claim_the_next_job(
    _: PgPoolOptions,
    opts: PgConnectOptions,
) {
    per_mall_start_gap_holds(opts, Finish::WithNextClaim).await;
}

async fn per_mall_start_gap_holds(opts: PgConnectOptions, finish: Finish) {
    let pool = big_pool(opts, 12).await;
    let queue = queue(&pool).await;
    let gap = Duration::from_millis(40);
    queue
        .upsert_mall(&MallLimits {
            min_start_gap: gap,
            max_running: Some(2),
            ..MallLimits::unlimited(mall(MALL))
        })
        .await
        .unwrap();
    enqueue_numbered(&queue, "g", 15, &[MALL]).await;
    run_claimers(
        &queue,
        8,
        Duration::from_millis(5),
        vec![mall(MALL)],
        finish,
    )
    .await;

    let starts: Vec<DateTime<Utc>> = sqlx::query_scalar!(
        r#"select run_started_at as "s!" from job where mall = $1 order by run_started_at"#,
        MALL
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(starts.len(), 15);
    assert_eq!(
        count(&pool, "select count(*) from job where state = 'done'").await,
        15
    );
    for w in starts.windows(2) {
        let d = (w[1] - w[0]).to_std().unwrap();
        assert!(d >= gap, "two starts {d:?} apart, gap is {gap:?}");
    }
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn claim_order_is_priority_then_oldest_and_respects_malls(pool: PgPool) {
    let queue = queue(&pool).await;
    let ctx = EnqueueContext::default();
    let batch = queue
        .enqueue(&search(&["old batch"], &[MALL], Priority::BATCH), &ctx)
        .await
        .unwrap();
    let beta = queue
        .enqueue(
            &search(&["beta only"], &["testmall-beta"], Priority::INTERACTIVE),
            &ctx,
        )
        .await
        .unwrap();
    let urgent = queue
        .enqueue(
            &search(&["new urgent"], &[MALL], Priority::INTERACTIVE),
            &ctx,
        )
        .await
        .unwrap();
    let jobs = queue.claim("node", Some(&[mall(MALL)]), 10).await.unwrap();
    let ids: Vec<i64> = jobs.iter().map(|j| j.lease.job_id).collect();
    let mut expect = vec![urgent.items[0].job_id, batch.items[0].job_id];
    expect.sort_unstable();
    let mut got = ids.clone();
    got.sort_unstable();
    assert_eq!(
        got, expect,
        "claimed a job of a mall the node does not serve"
    );
    let next = queue.claim("node", None, 10).await.unwrap();
    assert_eq!(
        next.iter().map(|j| j.lease.job_id).collect::<Vec<_>>(),
        vec![beta.items[0].job_id]
    );

    // Strict order with one claim at a time.
    let ids: Vec<i64> = {
        let q = queue_with(&pool, QueueConfig::default(), &["testmall-gamma"]).await;
        for (name, p) in [
            ("b1", Priority::BATCH),
            ("i1", Priority::INTERACTIVE),
            ("b2", Priority::BATCH),
            ("i2", Priority::INTERACTIVE),
        ] {
            q.enqueue(&search(&[name], &["testmall-gamma"], p), &ctx)
                .await
                .unwrap();
        }
        let mut ids = Vec::new();
        while let Some(j) = q
            .claim("n", Some(&[mall("testmall-gamma")]), 1)
            .await
            .unwrap()
            .pop()
        {
            ids.push(j.product_name);
        }
        ids.into_iter()
            .map(|n| {
                ["i1", "i2", "b1", "b2"]
                    .iter()
                    .position(|x| *x == n)
                    .unwrap() as i64
            })
            .collect()
    };
    assert_eq!(ids, vec![0, 1, 2, 3]);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn enqueue_notifies_listeners(pool: PgPool) {
    let queue = queue(&pool).await;
    let cancel = CancellationToken::new();
    let (mut wakeups, task) = JobListener::spawn(&pool, cancel.clone()).await.unwrap();
    wakeups.mark_seen();
    let waiter = tokio::spawn(async move { wakeups.wait(Duration::from_secs(10)).await });
    tokio::time::sleep(Duration::from_millis(50)).await;
    queue
        .enqueue(
            &search(&["ping"], &[MALL], Priority::INTERACTIVE),
            &EnqueueContext::default(),
        )
        .await
        .unwrap();
    let woken = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .unwrap()
        .unwrap();
    assert!(
        woken,
        "the waiter timed out instead of being woken by NOTIFY"
    );
    cancel.cancel();
    task.await.unwrap();
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn ops_snapshot_counts_what_the_queue_holds(pool: PgPool) {
    let queue = queue(&pool).await;
    queue
        .enqueue(
            &search(&["a", "b", "c"], &[MALL], Priority::INTERACTIVE),
            &EnqueueContext::default(),
        )
        .await
        .unwrap();
    let jobs = queue.claim("node", None, 2).await.unwrap();
    let mut failure = JobFailure::new(jobs[0].lease, ErrorClass::Permanent, "no profile");
    failure.metrics.cost_usd = 0.25;
    queue.fail_if_leased("node", &failure).await.unwrap();
    let ops = queue.ops().await.unwrap();
    assert_eq!(
        (ops.queued, ops.running, ops.dead, ops.dead_last_hour),
        (1, 1, 1, 1)
    );
    assert!(ops.oldest_queued.is_some());
    assert!((ops.cost_usd_last_hour - 0.25).abs() < 1e-9);
    let per_mall: HashMap<_, _> = ops
        .malls
        .iter()
        .map(|m| (m.mall.as_str(), (m.queued, m.running)))
        .collect();
    assert_eq!(per_mall[MALL], (1, 1));
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_product_gets_one_price_history_entry_when_its_last_mall_finishes(pool: PgPool) {
    let queue = queue(&pool).await;
    let accepted = queue
        .enqueue(
            &search(
                &["삼다수 2L x 12", "없는 상품"],
                &[MALL, "testmall-beta"],
                Priority::INTERACTIVE,
            ),
            &EnqueueContext::default(),
        )
        .await
        .unwrap();
    let jobs = queue.claim("node", None, 10).await.unwrap();
    assert_eq!(jobs.len(), 4);
    let mut beta_offer = offer(11_500, 3_000);
    beta_offer.mall = mall("testmall-beta");
    for (i, job) in jobs.iter().enumerate() {
        let result = match (job.product_name.as_str(), job.mall.as_str()) {
            ("삼다수 2L x 12", MALL) => {
                JobResult::found(job.lease, vec![offer(12_900, 0), offer(13_500, 0)]).unwrap()
            }
            ("삼다수 2L x 12", _) => {
                JobResult::found(job.lease, vec![beta_offer.clone()]).unwrap()
            }
            _ => JobResult::not_found(job.lease),
        };
        queue.complete_if_leased("node", &result).await.unwrap();
        let entries = count(&pool, "select count(*) from price_history").await;
        let samdasu_final = jobs[..=i]
            .iter()
            .filter(|j| j.product_name == "삼다수 2L x 12")
            .count()
            == 2;
        assert_eq!(
            entries,
            i64::from(samdasu_final),
            "after {} completions: the entry comes with the product's last result",
            i + 1
        );
    }
    let row = sqlx::query!(
        "select product_key, search_id, lowest_effective_price, lowest_mall, malls,
                covered_malls, complete, observed_at, recorded_at
         from price_history"
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(row.search_id, Some(accepted.search_id));
    assert_eq!(
        (row.lowest_effective_price, row.lowest_mall.as_str()),
        (12_900, MALL)
    );
    let malls = row.malls.as_array().unwrap();
    assert_eq!(malls.len(), 2, "{}", row.malls);
    assert_eq!(malls[1]["effective_price"], 14_500);
    assert_eq!(
        row.covered_malls,
        vec![MALL.to_owned(), "testmall-beta".to_owned()]
    );
    assert!(row.complete);
    assert!(row.observed_at <= row.recorded_at);
    assert_eq!(
        count(&pool, "select count(*) from price_history").await,
        1,
        "a not-found product has no price"
    );
}

/// A queue whose completions and claims run one batch at a time, with `jobs` queued jobs.
async fn one_batch_at_a_time(pool: &PgPool, jobs: usize) -> Queue {
    let queue = queue_with(
        pool,
        QueueConfig {
            max_batches_in_flight: 1,
            ..QueueConfig::default()
        },
        &[MALL],
    )
    .await;
    enqueue_numbered(&queue, "product ", jobs, &[MALL]).await;
    queue
}

/// Holds up `queue`'s one batch: node "blocker" claims a job and its completion waits for a
/// row lock the returned transaction holds. Requests made until the transaction ends wait
/// in line, and the next batch takes them all.
async fn hold_up(
    queue: &Queue,
    pool: &PgPool,
) -> (
    sqlx::Transaction<'static, sqlx::Postgres>,
    tokio::task::JoinHandle<()>,
) {
    let held = queue.claim("blocker", None, 1).await.unwrap().remove(0);
    let mut lock = pool.begin().await.unwrap();
    sqlx::query("select 1 from job where job_id = $1 for update")
        .bind(held.lease.job_id)
        .execute(&mut *lock)
        .await
        .unwrap();
    let blocked = queue.clone();
    let blocker = tokio::spawn(async move {
        let applied = blocked
            .complete_batch("blocker", &[JobResult::not_found(held.lease)])
            .await
            .unwrap();
        assert_eq!(applied, vec![(held.lease, true)]);
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    (lock, blocker)
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn concurrent_claims_share_one_statement_and_each_gets_only_its_own_jobs(
    _: PgPoolOptions,
    opts: PgConnectOptions,
) {
    let pool = big_pool(opts, 10).await;
    let queue = one_batch_at_a_time(&pool, 200).await;
    let (lock, blocker) = hold_up(&queue, &pool).await;
    let wanted = |k: u32| k % 4 + 1;
    let claims: Vec<_> = (0..24u32)
        .map(|k| {
            let queue = queue.clone();
            tokio::spawn(async move {
                let node = format!("node-{k}");
                let jobs = queue.claim(&node, None, wanted(k)).await.unwrap();
                (node, k, jobs)
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    lock.commit().await.unwrap();
    blocker.await.unwrap();

    let mut total = 0;
    let mut seen = std::collections::HashSet::new();
    for claim in claims {
        let (node, k, jobs) = claim.await.unwrap();
        assert_eq!(jobs.len(), wanted(k) as usize, "{node}: jobs claimed");
        for job in &jobs {
            let id = job.lease.job_id;
            assert!(seen.insert(id), "job {id} handed out twice");
            let holder: Option<String> =
                sqlx::query_scalar("select node_id from job where job_id = $1")
                    .bind(id)
                    .fetch_one(&pool)
                    .await
                    .unwrap();
            assert_eq!(holder.as_deref(), Some(node.as_str()), "job {id}'s holder");
        }
        total += jobs.len();
    }
    assert_eq!(
        count(&pool, "select count(*) from job where state = 'running'").await,
        i64::try_from(total).unwrap()
    );
    // The claims that waited together were made by one statement (one clock reading).
    assert_eq!(
        count(
            &pool,
            "select count(distinct run_started_at) from job where node_id like 'node-%'"
        )
        .await,
        1,
        "the waiting claims did not share a batch"
    );
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_report_the_database_refuses_fails_alone_in_its_batch(
    _: PgPoolOptions,
    opts: PgConnectOptions,
) {
    let pool = big_pool(opts, 10).await;
    let queue = one_batch_at_a_time(&pool, 20).await;
    let mut claimed = Vec::new();
    for k in 0..9 {
        let node = format!("node-{k}");
        let job = queue.claim(&node, None, 1).await.unwrap().remove(0);
        claimed.push((node, job.lease));
    }
    let (lock, blocker) = hold_up(&queue, &pool).await;
    let reports: Vec<_> = claimed
        .iter()
        .enumerate()
        .map(|(k, (node, lease))| {
            let mut result = JobResult::not_found(*lease);
            if k == 4 {
                // Past the model's validation; the job table's CHECK refuses it.
                result.metrics.cost_usd = -1.0;
            }
            let (queue, node) = (queue.clone(), node.clone());
            tokio::spawn(async move { queue.complete_and_claim(&node, &[result], None, 1).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    lock.commit().await.unwrap();
    blocker.await.unwrap();

    for (k, report) in reports.into_iter().enumerate() {
        let answer = report.await.unwrap();
        let lease = claimed[k].1;
        if k == 4 {
            assert!(
                matches!(answer, Err(Error::Database(_))),
                "the refused report: {answer:?}"
            );
            assert_eq!(job_state(&pool, lease.job_id).await.0, JobState::Running);
        } else {
            let answer =
                answer.unwrap_or_else(|e| panic!("report {k} failed with the bad one: {e}"));
            assert_eq!(answer.applied, vec![(lease, true)]);
            assert_eq!(answer.claimed.len(), 1, "report {k}'s next job");
            assert_eq!(job_state(&pool, lease.job_id).await.0, JobState::Done);
        }
    }
    assert_eq!(
        count(&pool, "select count(*) from job where state = 'done'").await,
        9
    );
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn jobs_claimed_for_a_caller_that_went_away_go_back_to_the_queue(
    _: PgPoolOptions,
    opts: PgConnectOptions,
) {
    let pool = big_pool(opts, 10).await;
    let queue = one_batch_at_a_time(&pool, 10).await;
    let (lock, blocker) = hold_up(&queue, &pool).await;
    let claimer = queue.clone();
    let gone = tokio::spawn(async move { claimer.claim("gone", None, 2).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    gone.abort();
    assert!(gone.await.unwrap_err().is_cancelled());
    lock.commit().await.unwrap();
    blocker.await.unwrap();

    let handed_back =
        "select count(*) from job_attempt where node_id = 'gone' and ended = 'handed_back'";
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while count(&pool, handed_back).await < 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the jobs claimed for the caller that went away were not handed back"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Back in the queue at once: no attempt and no reclaim counted, a new lease next time.
    assert_eq!(
        count(&pool, "select count(*) from job where state = 'running'").await,
        0
    );
    assert_eq!(
        count(
            &pool,
            "select count(*) from job where attempts > 0 or reclaims > 0"
        )
        .await,
        0
    );
    let next = queue.claim("node-a", None, 10).await.unwrap();
    assert_eq!(next.len(), 9);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_layout_failure_is_dead_after_one_attempt_with_no_retry(pool: PgPool) {
    let queue = queue(&pool).await;
    let job_id = queue
        .enqueue(
            &search(&["햇반 210g 12개"], &[MALL], Priority::INTERACTIVE),
            &EnqueueContext::default(),
        )
        .await
        .unwrap()
        .items[0]
        .job_id;
    let now = db_now(&pool).await;
    let job = queue
        .at(now)
        .claim("node", None, 1)
        .await
        .unwrap()
        .remove(0);
    assert_eq!(
        (job.attempt, job.max_attempts),
        (1, 3),
        "attempts were left"
    );
    let failed = queue
        .at(now)
        .fail_if_leased(
            "node",
            &JobFailure::new(
                job.lease,
                ErrorClass::Layout,
                "no card source found a card on a healthy page",
            ),
        )
        .await
        .unwrap();
    assert_eq!(failed.state, JobState::Dead);
    assert_eq!(failed.attempts, 1);
    assert_eq!(failed.mall.as_str(), MALL);
    assert_eq!(
        job_state(&pool, job_id).await,
        (JobState::Dead, 1, 1, Some(ErrorClass::Layout))
    );
    // No retry was scheduled: nothing is claimable, not even long after any backoff.
    let later = now + TimeDelta::hours(1);
    assert!(
        queue
            .at(later)
            .claim("node", None, 1)
            .await
            .unwrap()
            .is_empty()
    );
    let (attempts, ended, class): (i64, String, Option<String>) = sqlx::query_as(
        "select count(*) over (), ended::text, error_class::text from job_attempt where job_id = $1",
    )
    .bind(job_id)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(
        (attempts, ended.as_str(), class.as_deref()),
        (1, "failed", Some("layout"))
    );
    let finished: Option<DateTime<Utc>> =
        sqlx::query_scalar("select finished_at from job where job_id = $1")
            .bind(job_id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(finished, Some(now));
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn an_unknown_shipping_offer_with_a_fee_is_refused(pool: PgPool) {
    // Off the wire: the model refuses it, naming the field.
    let wire = pb::Offer {
        mall: MALL.into(),
        title: "t".into(),
        price: 9_000,
        shipping_fee: 500,
        effective_price: Some(9_500),
        match_score: 0.9,
        shipping: pb::ShippingStatus::Unknown as i32,
        ..Default::default()
    };
    assert_eq!(
        Offer::try_from(wire.clone()).unwrap_err().field,
        "shipping_fee"
    );
    let report = pb::JobResult {
        job_id: 1,
        lease_epoch: 1,
        outcome: pb::Outcome::Found as i32,
        offers: vec![wire],
        ..Default::default()
    };
    assert_eq!(
        JobResult::try_from(report).unwrap_err().field,
        "offers[0].shipping_fee"
    );

    // Built in-process: the queue refuses the report and changes nothing.
    let queue = queue(&pool).await;
    queue
        .enqueue(
            &search(&["x"], &[MALL], Priority::INTERACTIVE),
            &EnqueueContext::default(),
        )
        .await
        .unwrap();
    let job = queue.claim("node", None, 1).await.unwrap().remove(0);
    let bad = Offer {
        shipping_fee: 500,
        ..unknown_shipping(9_000)
    };
    let result = JobResult::found(job.lease, vec![offer(12_000, 0), bad]).unwrap();
    match queue.complete_if_leased("node", &result).await {
        Err(Error::InvalidArgument(e)) => assert_eq!(e.field, "offers[1].shipping_fee"),
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    assert_eq!(
        job_state(&pool, job.lease.job_id).await.0,
        JobState::Running
    );
    assert_eq!(count(&pool, "select count(*) from offer").await, 0);

    // And the table's check stands behind both.
    let e = sqlx::query(
        "insert into offer (job_id, rank, mall, title, price, shipping_fee, match_score, shipping_status)
         values ($1, 0, 'testmall-alpha', 't', 9000, 500, 0.9, 'unknown')",
    )
    .bind(job.lease.job_id)
    .execute(&pool)
    .await
    .unwrap_err();
    assert_eq!(
        e.as_database_error().unwrap().constraint(),
        Some("offer_unknown_shipping_has_no_fee")
    );
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn offers_keep_shipping_list_price_and_flags_known_shipping_first_at_a_tie(pool: PgPool) {
    let queue = queue(&pool).await;
    queue
        .enqueue(
            &search(&["x"], &[MALL], Priority::INTERACTIVE),
            &EnqueueContext::default(),
        )
        .await
        .unwrap();
    let job = queue.claim("node", None, 1).await.unwrap().remove(0);
    let flagged = Offer {
        list_price: 15_000,
        flags: vec![CardClass::Overseas, CardClass::Catalog],
        ..offer(12_000, 0)
    };
    let result = JobResult::found(
        job.lease,
        vec![
            unknown_shipping(12_000),
            offer(10_000, 2_000),
            flagged,
            unknown_shipping(9_000),
        ],
    )
    .unwrap();
    queue.complete_if_leased("node", &result).await.unwrap();
    let rows: Vec<(i16, i64, i64, String, i64, Vec<String>)> = sqlx::query_as(
        "select rank, effective_price, shipping_fee, shipping_status, list_price, flags
         from offer where job_id = $1 order by rank",
    )
    .bind(job.lease.job_id)
    .fetch_all(&pool)
    .await
    .unwrap();
    let strings = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    assert_eq!(
        rows,
        [
            (0, 9_000, 0, "unknown".into(), 0, vec![]),
            (
                1,
                12_000,
                0,
                "free".into(),
                15_000,
                strings(&["overseas", "catalog"])
            ),
            (2, 12_000, 2_000, "paid".into(), 0, vec![]),
            (3, 12_000, 0, "unknown".into(), 0, vec![]),
        ]
    );
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn price_history_takes_only_offers_of_known_shipping(pool: PgPool) {
    let queue = queue(&pool).await;
    let accepted = queue
        .enqueue(
            &search(
                &["삼다수 2L x 12", "배송비 모르는 상품"],
                &[MALL, "testmall-beta"],
                Priority::INTERACTIVE,
            ),
            &EnqueueContext::default(),
        )
        .await
        .unwrap();
    let jobs = queue.claim("node", None, 10).await.unwrap();
    assert_eq!(jobs.len(), 4);
    for job in &jobs {
        let on = |mut o: Offer| {
            o.mall = job.mall.clone();
            o
        };
        let result = match (job.product_name.as_str(), job.mall.as_str()) {
            // The cheapest price has unknown shipping: the lowest is alpha's 12,000.
            ("삼다수 2L x 12", MALL) => JobResult::found(
                job.lease,
                vec![on(unknown_shipping(9_000)), on(offer(11_000, 1_000))],
            ),
            ("삼다수 2L x 12", _) => JobResult::found(job.lease, vec![on(offer(12_500, 0))]),
            // Only offers of unknown shipping, or none: no answer to record.
            (_, MALL) => JobResult::found(job.lease, vec![on(unknown_shipping(5_000))]),
            _ => Ok(JobResult::not_found(job.lease)),
        }
        .unwrap();
        queue.complete_if_leased("node", &result).await.unwrap();
    }
    assert_eq!(count(&pool, "select count(*) from price_history").await, 1);
    let (key, search_id, lowest, lowest_mall, mut malls): (
        String,
        Option<i64>,
        i64,
        String,
        serde_json::Value,
    ) = sqlx::query_as(
        "select product_key, search_id, lowest_effective_price, lowest_mall, malls from price_history",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(key, "name:삼다수 2l x 12");
    assert_eq!(search_id, Some(accepted.search_id));
    assert_eq!((lowest, lowest_mall.as_str()), (12_000, MALL));
    for m in malls.as_array_mut().unwrap() {
        let observed = m.as_object_mut().unwrap().remove("observed_at");
        assert!(observed.is_some_and(|t| t.is_string()), "{m}");
    }
    assert_eq!(
        malls,
        serde_json::json!([
            {"mall": MALL, "price": 11_000, "shipping_fee": 1_000, "shipping": "paid",
             "effective_price": 12_000, "url": "http://127.0.0.1/p/1", "title": "제주 삼다수 2L x 12",
             "cached": false},
            {"mall": "testmall-beta", "price": 12_500, "shipping_fee": 0, "shipping": "free",
             "effective_price": 12_500, "url": "http://127.0.0.1/p/1", "title": "제주 삼다수 2L x 12",
             "cached": false},
        ])
    );
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn layout_share_counts_the_attempts_nodes_finished_in_the_last_15_minutes(pool: PgPool) {
    let queue = queue(&pool).await;
    enqueue_numbered(&queue, "alpha ", 7, &[MALL]).await;
    enqueue_numbered(&queue, "beta ", 1, &["testmall-beta"]).await;
    let t0 = db_now(&pool).await;
    let q = queue.at(t0);
    let mut jobs = q.claim("node", None, 10).await.unwrap();
    assert_eq!(jobs.len(), 8);
    let beta = jobs.iter().position(|j| j.mall.as_str() != MALL).unwrap();
    let beta = jobs.remove(beta);
    let fail = |job: &ClaimedJob, class| JobFailure::new(job.lease, class, format!("{class:?}"));
    for job in &jobs[..3] {
        q.fail_if_leased("node", &fail(job, ErrorClass::Layout))
            .await
            .unwrap();
    }
    q.fail_if_leased("node", &fail(&jobs[3], ErrorClass::Network))
        .await
        .unwrap();
    let found = JobResult::found(jobs[4].lease, vec![offer(1_000, 0)]).unwrap();
    q.complete_if_leased("node", &found).await.unwrap();
    q.hand_back_if_leased("node", jobs[5].lease).await.unwrap();
    // jobs[6] runs on; its lease expires (an attempt without a verdict on the page).
    q.fail_if_leased("node", &fail(&beta, ErrorClass::Layout))
        .await
        .unwrap();
    let reaped = queue.at(t0 + TimeDelta::seconds(46)).reap().await.unwrap();
    assert!(reaped.iter().any(|r| r.job_id == jobs[6].lease.job_id));

    let share = |ops: &lps_coordinator::queue::QueueOps, m: &str| {
        let m = ops.malls.iter().find(|x| x.mall == m).unwrap();
        (m.layout_failures_15m, m.finished_15m, m.layout_share_15m())
    };
    let ops = queue.at(t0 + TimeDelta::minutes(1)).ops().await.unwrap();
    assert_eq!(share(&ops, MALL), (3, 5, 0.6), "{ops:?}");
    assert_eq!(share(&ops, "testmall-beta"), (1, 1, 1.0));
    // The window is 15 minutes, up to now: later attempts and older ones are not counted.
    let ops = queue.at(t0 + TimeDelta::minutes(16)).ops().await.unwrap();
    assert_eq!(share(&ops, MALL), (0, 0, 0.0));
    let ops = queue.at(t0 - TimeDelta::seconds(1)).ops().await.unwrap();
    assert_eq!(share(&ops, MALL), (0, 0, 0.0));
}
