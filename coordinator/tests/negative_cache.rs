//! The negative cache against real PostgreSQL (`#[sqlx::test]`), through the queue's own
//! transitions: a "not found" the mall said is remembered for LPS_NEGATIVE_TTL_NO_RESULTS,
//! one the judge decided for the shorter LPS_NEGATIVE_TTL_JUDGED; an entry answers only
//! while the queue judges with the judge version and vocabulary revision it was written
//! under; `Queue::clear_negative_cache` forgets a product's entries.

use std::{collections::HashMap, time::Duration};

use chrono::{DateTime, TimeDelta, Utc};
use lps_coordinator::{
    db::MIGRATOR,
    queue::{
        ClaimedJob, CurrentJudge, Disposition, EnqueueContext, MallLimits, Queue, QueueConfig,
    },
};
use lps_proto::{
    model::{
        JUDGE_VERSION, JobResult, JudgedWith, MallId, Priority, ProductSpec, RoundReport,
        SearchRequest,
    },
    pb,
};
use sqlx::PgPool;

const ALPHA: &str = "testmall-alpha";
const BETA: &str = "testmall-beta";

fn words(stopwords: &[&str]) -> pb::Vocabulary {
    pb::Vocabulary {
        stopwords: stopwords.iter().map(|w| (*w).to_owned()).collect(),
        ..Default::default()
    }
}

/// The judge of this build with `vocabulary`, beta's profile adding `beta_words`.
fn judge(vocabulary: &pb::Vocabulary, beta_words: &pb::Vocabulary) -> CurrentJudge {
    CurrentJudge::new(vocabulary, [(BETA, beta_words)])
}

async fn queue(pool: &PgPool, judge: CurrentJudge) -> Queue {
    let config = QueueConfig {
        negative_ttl_no_results: Duration::from_secs(24 * 3600),
        negative_ttl_judged: Duration::from_secs(3 * 3600),
        ..QueueConfig::default()
    };
    let queue = Queue::new(pool.clone(), config).judging_with(judge);
    for m in [ALPHA, BETA] {
        queue
            .upsert_mall(&MallLimits::unlimited(MallId::new(m).unwrap()))
            .await
            .unwrap();
    }
    queue
}

fn search(product: &ProductSpec, malls: &[&str]) -> SearchRequest {
    SearchRequest::new(
        vec![product.clone()],
        malls.iter().map(|m| MallId::new(*m).unwrap()).collect(),
        Priority::INTERACTIVE,
        None,
        None,
    )
    .unwrap()
}

fn round(cards_seen: u32) -> RoundReport {
    RoundReport {
        kind: "original".into(),
        query: "q".into(),
        cards_seen,
        matches: 0,
        elapsed_ms: 10,
        source: "dom".into(),
        excluded: Default::default(),
        pages: 1,
    }
}

/// A not-found of `job`: the mall's own (`cards_seen` 0 in every round) or the judge's.
fn not_found(job: &ClaimedJob, cards_seen: u32, judged_with: JudgedWith) -> JobResult {
    let mut result = JobResult::not_found(job.lease).judged_with(judged_with);
    result.rounds = vec![round(cards_seen), round(0)];
    result
}

async fn db_now(pool: &PgPool) -> DateTime<Utc> {
    sqlx::query_scalar!(r#"select now() as "now!""#)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// Enqueues `product` on `malls` with `queue` and returns each mall's disposition.
async fn ask(queue: &Queue, product: &ProductSpec, malls: &[&str]) -> Vec<Disposition> {
    queue
        .enqueue(&search(product, malls), &EnqueueContext::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|i| i.disposition)
        .collect()
}

/// Claims every queued job and answers it with `answer`.
async fn finish(queue: &Queue, answer: impl Fn(&ClaimedJob) -> JobResult) {
    for job in queue.claim("node-1", None, 64).await.unwrap() {
        queue
            .complete_if_leased("node-1", &answer(&job))
            .await
            .unwrap();
    }
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_judged_not_found_is_remembered_for_less_than_the_malls_own(pool: PgPool) {
    let judge = judge(&words(&["무료배송"]), &words(&["로켓배송"]));
    let queue = queue(&pool, judge.clone()).await;
    let product = ProductSpec::new(None, "없는 상품 9000").unwrap();
    assert_eq!(
        ask(&queue, &product, &[ALPHA, BETA]).await,
        [Disposition::Queued, Disposition::Queued]
    );
    // Alpha's page said "no results"; beta's showed cards the judge refused.
    finish(&queue, |job| {
        let cards = if job.mall.as_str() == ALPHA { 0 } else { 12 };
        not_found(job, cards, judge.judged_with(job.mall.as_str()))
    })
    .await;
    let kinds: Vec<(String, String, Option<i32>)> = sqlx::query_as(
        "select j.mall, n.kind, n.judge_version from negative_cache n
         join job j using (job_id) order by j.mall",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let version = i32::try_from(JUDGE_VERSION).unwrap();
    assert_eq!(
        kinds,
        [
            (ALPHA.into(), "no_results".into(), Some(version)),
            (BETA.into(), "judged".into(), Some(version)),
        ]
    );

    let now = db_now(&pool).await;
    let cached = [Disposition::CachedNotFound, Disposition::CachedNotFound];
    assert_eq!(ask(&queue, &product, &[ALPHA, BETA]).await, cached);
    // After the judged time, only the mall's own not-found still answers.
    let later = queue.at(now + TimeDelta::hours(4));
    assert_eq!(
        ask(&later, &product, &[ALPHA, BETA]).await,
        [Disposition::CachedNotFound, Disposition::Queued]
    );
    let next_day = queue.at(now + TimeDelta::hours(25));
    assert_eq!(
        ask(&next_day, &product, &[ALPHA]).await,
        [Disposition::Queued]
    );
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_vocabulary_or_judge_change_retires_entries_written_under_another(pool: PgPool) {
    let base = words(&["무료배송"]);
    let beta_words = words(&["로켓배송"]);
    let judge = judge(&base, &beta_words);
    let queue = queue(&pool, judge.clone()).await;
    let product = ProductSpec::new(Some("SKU-9"), "없는 상품 9001").unwrap();
    ask(&queue, &product, &[ALPHA, BETA]).await;
    finish(&queue, |job| {
        not_found(job, 0, judge.judged_with(job.mall.as_str()))
    })
    .await;
    let cached = vec![Disposition::CachedNotFound; 2];
    assert_eq!(ask(&queue, &product, &[ALPHA, BETA]).await, cached);

    // A coordinator restarted with another word in beta's profile: beta's entry was judged
    // with other words and is not used; alpha's words did not change.
    let beta_changed =
        self::queue(&pool, self::judge(&base, &words(&["로켓배송", "새벽배송"]))).await;
    assert_eq!(
        ask(&beta_changed, &product, &[ALPHA, BETA]).await,
        [Disposition::CachedNotFound, Disposition::Queued]
    );
    // Another base vocabulary: every mall's entries go.
    let base_changed = self::queue(
        &pool,
        self::judge(&words(&["무료배송", "정품"]), &beta_words),
    )
    .await;
    assert_eq!(
        ask(&base_changed, &product, &[ALPHA]).await,
        [Disposition::Queued]
    );
    // Another judge version (a node of another build reported it), same words: not used.
    let other = ProductSpec::new(None, "다른 없는 상품").unwrap();
    ask(&queue, &other, &[ALPHA]).await;
    finish(&queue, |job| {
        let mut judged = judge.judged_with(job.mall.as_str());
        judged.judge_version += 1;
        not_found(job, 0, judged)
    })
    .await;
    assert_eq!(ask(&queue, &other, &[ALPHA]).await, [Disposition::Queued]);
    // A node too old to say what judged: not reused either.
    finish(&queue, |job| not_found(job, 0, JudgedWith::default())).await;
    assert_eq!(ask(&queue, &other, &[ALPHA]).await, [Disposition::Queued]);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_zero_time_remembers_nothing_and_forgets_what_was(pool: PgPool) {
    let judge = judge(&words(&[]), &words(&[]));
    let queue = self::queue(&pool, judge.clone()).await;
    let product = ProductSpec::new(None, "없는 상품 9002").unwrap();
    ask(&queue, &product, &[ALPHA]).await;
    // An entry of an older judge: it answers nothing, but it is there.
    finish(&queue, |job| {
        let mut older = judge.judged_with(ALPHA);
        older.judge_version += 1;
        not_found(job, 5, older)
    })
    .await;
    let count = || async {
        sqlx::query_scalar::<_, i64>("select count(*) from negative_cache")
            .fetch_one(&pool)
            .await
            .unwrap()
    };
    assert_eq!(count().await, 1);
    // Judged not-founds are not remembered any more: the next one forgets the old entry,
    // and the mall's own "no results" still is.
    let forgetful = Queue::new(
        pool.clone(),
        QueueConfig {
            negative_ttl_judged: Duration::ZERO,
            ..QueueConfig::default()
        },
    )
    .judging_with(judge.clone());
    assert_eq!(
        ask(&forgetful, &product, &[ALPHA]).await,
        [Disposition::Queued]
    );
    finish(&forgetful, |job| {
        not_found(job, 5, judge.judged_with(ALPHA))
    })
    .await;
    assert_eq!(count().await, 0);
    assert_eq!(
        ask(&forgetful, &product, &[ALPHA]).await,
        [Disposition::Queued]
    );
    finish(&forgetful, |job| {
        not_found(job, 0, judge.judged_with(ALPHA))
    })
    .await;
    assert_eq!(
        ask(&forgetful, &product, &[ALPHA]).await,
        [Disposition::CachedNotFound]
    );
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn clearing_forgets_a_products_entries_on_the_malls_named(pool: PgPool) {
    let judge = judge(&words(&[]), &words(&[]));
    let queue = queue(&pool, judge.clone()).await;
    let plain = ProductSpec::new(Some("SKU-7"), "없는 상품 9003").unwrap();
    let hinted = ProductSpec::try_from(&pb::Product {
        code: "SKU-7".into(),
        name: "없는 상품 9003".into(),
        gtin: "8801234567893".into(),
        ..Default::default()
    })
    .unwrap();
    let other = ProductSpec::new(Some("SKU-8"), "다른 상품").unwrap();
    for p in [&plain, &hinted, &other] {
        ask(&queue, p, &[ALPHA, BETA]).await;
    }
    finish(&queue, |job| {
        not_found(job, 0, judge.judged_with(job.mall.as_str()))
    })
    .await;
    // One mall: both sets of hints of SKU-7 there.
    let beta = [MallId::new(BETA).unwrap()];
    assert_eq!(queue.clear_negative_cache(&plain, &beta).await.unwrap(), 2);
    assert_eq!(
        ask(&queue, &hinted, &[ALPHA, BETA]).await,
        [Disposition::CachedNotFound, Disposition::Queued]
    );
    // Every mall; the other product keeps its entries.
    assert_eq!(queue.clear_negative_cache(&plain, &[]).await.unwrap(), 2);
    let left: HashMap<String, i64> = sqlx::query_as::<_, (String, i64)>(
        "select j.product_key, count(*) from negative_cache n join job j using (job_id)
         group by j.product_key",
    )
    .fetch_all(&pool)
    .await
    .unwrap()
    .into_iter()
    .collect();
    assert_eq!(left, HashMap::from([(other.crawl_key(), 2)]));
}
