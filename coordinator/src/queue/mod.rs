//! The job queue: every rule of DESIGN §2 "Queue rules", enforced in PostgreSQL.
//!
//! Owns the `job`, `search_request`, `search_item`, `offer`, `negative_cache`,
//! `job_attempt`, `stale_report`, `mall`, `mall_slot` and `spend_minute` tables: no other
//! module's statements change them (DESIGN §1, "Table owners"). Each transition is ONE
//! guarded SQL statement (in `sql/`; CancelSearch is three in one transaction), named
//! after its precondition:
//!
//! - [`Queue::enqueue`]: a whole search in one round trip (dedupe + promotion + caches);
//! - [`Queue::claim`]: `FOR UPDATE SKIP LOCKED` inside the `UPDATE … RETURNING`, at most `n`,
//!   per-mall cap and start gap, the hourly spend caps, `lease_epoch + 1` (the fencing token);
//! - [`Queue::renew_if_leased`], [`Queue::complete_if_leased`], [`Queue::fail_if_leased`],
//!   [`Queue::hand_back_if_leased`]: `WHERE job_id AND state = 'running' AND lease_epoch`;
//!   zero rows is [`Error::LeaseLost`] (recorded in `stale_report`, never applied);
//! - [`Queue::release_node`], [`Queue::reap`];
//! - [`Queue::cancel_search`] and [`Queue::retry_dead`] (`levers.rs`): the transactions of
//!   CancelSearch and RetryDead;
//! - [`embedded`]: the job's part of other modules' statements, on their connection (a
//!   block's IP burn in the ledger's release, retention's batches of finished jobs);
//! - [`Queue::record_spend`] (`spend.rs`): what a run cost, on its attempt, whether or not its
//!   report still held the lease.
//!
//! Completions and claims made at the same moment by different callers share a batch
//! (`settle.rs`): one `complete.sql` over all their reports and one claim statement per
//! group of claims, in one transaction; each caller still gets exactly its own answer.
//!
//! Invariants: no transaction is held across remote work (a transaction is the statements
//! of one call or one batch); a lease never outlives its job's hard deadline; a completed
//! job's offers and negative cache entry are written by the same statement that makes it
//! `done`. All methods are cancellation-safe in the sense that an aborted call either
//! committed or did nothing (a batch runs to its end in its own task; jobs claimed for a
//! caller that went away are handed back).
//!
//! Time: every statement takes an optional `now`; `None` means the database clock
//! (`clock_timestamp()`), so all replicas agree. Tests pin it with [`Queue::at`].

pub mod embedded;
mod levers;
mod listener;
mod outage;
mod settle;
mod spend;
mod types;

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use chrono::{DateTime, Utc};
use lps_proto::model::{
    ErrorClass, FieldError, JobFailure, JobResult, JobState, Lease, MallId, Outcome, ProductHints,
    SearchRequest,
};
use sqlx::PgPool;
use tokio::sync::oneshot;
use tracing::{Instrument as _, info_span, instrument};

pub use crate::error::Error;
pub use levers::{MAX_RETRY_IDS, RetryDeadFilter, SearchCancelled};
pub use listener::{DELIVERY_CHANNEL, JobListener, Wakeups};
pub use outage::Outages;
pub use settle::BatchCounts;
pub use spend::{SPEND_WINDOW, Spent, check_cap as check_spend_cap};
pub use types::*;

/// Default of `LPS_NEGATIVE_TTL_NO_RESULTS`: a mall's own "no results" is remembered a day.
pub const DEFAULT_NEGATIVE_TTL_NO_RESULTS: &str = "24h";
/// Default of `LPS_NEGATIVE_TTL_JUDGED`: a judge's "none of these cards" is remembered for
/// less, because rules and vocabularies get fixed and a wrong one must not stick.
pub const DEFAULT_NEGATIVE_TTL_JUDGED: &str = "3h";
/// The longest either negative-cache time may be.
pub const MAX_NEGATIVE_TTL: Duration = Duration::from_secs(30 * 24 * 3600);

/// What judges cards now: this build's judge and the vocabulary revision of each mall, as
/// the nodes compute it from the Welcome (`model::vocabulary_revision`). A negative-cache
/// entry answers a request only when it was written under the same (DESIGN §2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CurrentJudge {
    pub judge_version: u32,
    /// The revision of the base vocabulary (a mall whose profile adds no words).
    pub base_revision: String,
    /// Malls whose profile adds words, with the revision of base plus additions.
    pub revisions: HashMap<String, String>,
}

impl CurrentJudge {
    /// This build's judge with `vocabulary` and the profiles' additions (`(mall,
    /// additions)`), as a Welcome sends them.
    pub fn new<'a>(
        vocabulary: &lps_proto::pb::Vocabulary,
        additions: impl IntoIterator<Item = (&'a str, &'a lps_proto::pb::Vocabulary)>,
    ) -> Self {
        Self {
            judge_version: lps_proto::model::JUDGE_VERSION,
            base_revision: lps_proto::model::vocabulary_revision(vocabulary, None),
            revisions: additions
                .into_iter()
                .map(|(mall, words)| {
                    (
                        mall.to_owned(),
                        lps_proto::model::vocabulary_revision(vocabulary, Some(words)),
                    )
                })
                .collect(),
        }
    }

    /// The revision `mall`'s cards are judged with.
    pub fn revision(&self, mall: &str) -> &str {
        self.revisions.get(mall).unwrap_or(&self.base_revision)
    }

    /// What a node of this build reports having judged `mall`'s cards with.
    pub fn judged_with(&self, mall: &str) -> lps_proto::model::JudgedWith {
        lps_proto::model::JudgedWith {
            judge_version: self.judge_version,
            vocabulary_revision: self.revision(mall).to_owned(),
        }
    }
}

/// The NOTIFY channel that wakes claimers; the payload is the mall id.
pub const JOB_CHANNEL: &str = "lps_job";

/// The window of the ops snapshot's layout share per mall (`layout` failures over the
/// attempts the nodes finished), which the `layout_changed` alert watches.
pub const LAYOUT_SHARE_WINDOW: Duration = Duration::from_secs(15 * 60);

/// Queue behaviour that operators tune.
#[derive(Debug, Clone)]
pub struct QueueConfig {
    /// A lease lasts this long unless a heartbeat renews it.
    pub lease_ttl: Duration,
    /// Hard limit for one run of a job, whatever the heartbeats say.
    pub run_timeout: Duration,
    /// Failed attempts before a job is dead.
    pub max_attempts: u16,
    /// Retry backoff: `min(cap, base * 2^(attempts-1))`, jittered to 50–100 %.
    pub backoff_base: Duration,
    pub backoff_cap: Duration,
    /// How long a "not found" the mall said (no results, no card) is answered from the
    /// negative cache; zero: not remembered.
    pub negative_ttl_no_results: Duration,
    /// How long a "not found" the judge decided (cards read, none accepted) is; at most
    /// `negative_ttl_no_results`, zero: not remembered.
    pub negative_ttl_judged: Duration,
    /// Most jobs one reaper pass ends.
    pub reap_batch: u32,
    /// Most batches of completions and claims running at once (each holds one pooled
    /// connection while it runs); see `settle.rs`.
    pub max_batches_in_flight: usize,
    /// Deployment-wide cap on what attempts may cost per rolling hour, USD; `None`: no cap.
    /// Reached, no job is claimed until the hour frees up (`spend.rs`).
    pub spend_cap_hourly_usd: Option<f64>,
    /// USD per GB of proxy traffic (`LPS_PROXY_USD_PER_GB`): what a run whose node vanished
    /// is charged for the bytes its last heartbeat reported.
    pub proxy_usd_per_gb: f64,
}

/// Default of [`QueueConfig::proxy_usd_per_gb`] (`LPS_PROXY_USD_PER_GB`; also sent to nodes).
pub const DEFAULT_PROXY_USD_PER_GB: f64 = 8.0;

// The queue's flag defaults (the coordinator's `LPS_LEASE_TTL`, `LPS_JOB_DEADLINE`,
// `LPS_MAX_ATTEMPTS`, `LPS_BACKOFF_BASE`, `LPS_BACKOFF_CAP`).
pub const DEFAULT_LEASE_TTL: &str = "45s";
pub const DEFAULT_JOB_DEADLINE: &str = "300s";
pub const DEFAULT_MAX_ATTEMPTS: u16 = 3;
pub const DEFAULT_BACKOFF_BASE: &str = "5s";
pub const DEFAULT_BACKOFF_CAP: &str = "600s";

impl Default for QueueConfig {
    /// The queue's flag defaults (`DEFAULT_*` above).
    fn default() -> Self {
        use crate::settings::default_duration;
        Self {
            lease_ttl: default_duration(DEFAULT_LEASE_TTL),
            run_timeout: default_duration(DEFAULT_JOB_DEADLINE),
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            backoff_base: default_duration(DEFAULT_BACKOFF_BASE),
            backoff_cap: default_duration(DEFAULT_BACKOFF_CAP),
            negative_ttl_no_results: default_duration(DEFAULT_NEGATIVE_TTL_NO_RESULTS),
            negative_ttl_judged: default_duration(DEFAULT_NEGATIVE_TTL_JUDGED),
            reap_batch: 500,
            max_batches_in_flight: 2,
            spend_cap_hourly_usd: None,
            proxy_usd_per_gb: DEFAULT_PROXY_USD_PER_GB,
        }
    }
}

/// The PostgreSQL job queue. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Queue {
    pool: PgPool,
    config: QueueConfig,
    now: Option<DateTime<Utc>>,
    limited: Arc<LimitedMalls>,
    settler: Arc<settle::Settler>,
    outages: Arc<Outages>,
    /// What judges cards now; `None` (a queue without nodes' vocabulary, as in tests):
    /// only negative-cache entries that name no judge answer requests.
    judge: Option<Arc<CurrentJudge>>,
}

/// Which malls have a concurrency cap or a start gap, as last read from the `mall` table
/// (shared by clones). It only picks the claim statement: `claim_unlimited.sql` skips a
/// limited mall by itself, so a stale answer can delay that mall's jobs by at most
/// [`LIMITS_TTL`] but never breaks a limit.
#[derive(Debug, Default)]
struct LimitedMalls(Mutex<Option<(Instant, Arc<HashSet<String>>)>>);

/// A job is claimed only while a proxy port will be free for it within this long: a port
/// resting after its budget counts once its rest ends within it, so a job that would wait
/// longer stays queued, uncharged, instead of taking a node slot to sleep in (DESIGN §4).
/// Below the node's own wait for a port (60 s) before it hands a job back.
pub const CLAIM_PORT_WAIT: Duration = Duration::from_secs(30);

/// How long a read of the limited malls is trusted (another replica may change a limit).
const LIMITS_TTL: Duration = Duration::from_secs(1);

/// The products of a request as its digest reads them: `[code, name]`, and the hints' key
/// third only when a product has hints (so digests of products without them never
/// changed). Searches and schedules digest their products the same way.
pub(crate) fn digest_products(
    products: &[lps_proto::model::ProductSpec],
) -> Vec<serde_json::Value> {
    products
        .iter()
        .map(|p| match p.hints_key() {
            None => serde_json::json!([p.code(), p.name()]),
            Some(hints) => serde_json::json!([p.code(), p.name(), hints]),
        })
        .collect()
}

/// SHA-256 (hex) of what a search asks for: products (code, name, and their hints' key
/// when they have hints) in order, malls as a set (empty: every enabled mall), priority
/// and `max_age`, and — only when it names any, so digests of requests without them did
/// not change — its destinations as a set and `notify_each_product`. Two requests with one digest are the same request; the
/// idempotency key itself is not part of it.
pub fn request_digest(req: &SearchRequest) -> String {
    use sha2::{Digest as _, Sha256};
    let mut malls: Vec<&str> = req.malls.iter().map(MallId::as_str).collect();
    malls.sort_unstable();
    let mut canonical = serde_json::json!({
        "products": digest_products(&req.products),
        "malls": malls,
        "priority": req.priority.get(),
        "max_age_ms": req.max_age.map(millis),
    });
    if !req.destinations.is_empty() {
        let mut destinations: Vec<&str> = req.destinations.iter().map(|d| d.as_str()).collect();
        destinations.sort_unstable();
        canonical["destinations"] = serde_json::json!(destinations);
        canonical["notify_each_product"] = serde_json::json!(req.notify_each_product);
    }
    Sha256::digest(canonical.to_string().as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl Queue {
    pub fn new(pool: PgPool, config: QueueConfig) -> Self {
        Self {
            pool,
            config,
            now: None,
            limited: Arc::default(),
            settler: Arc::default(),
            outages: Arc::default(),
            judge: None,
        }
    }

    /// The same queue, its negative cache answering only with entries written under
    /// `judge` (the coordinator sets it from the vocabulary it sends nodes).
    #[must_use]
    pub fn judging_with(self, judge: CurrentJudge) -> Self {
        Self {
            judge: Some(Arc::new(judge)),
            ..self
        }
    }

    /// What judges cards now, if set ([`Queue::judging_with`]).
    pub fn current_judge(&self) -> Option<&CurrentJudge> {
        self.judge.as_deref()
    }

    /// The same queue with its clock pinned to `now` (tests and replays).
    #[must_use]
    pub fn at(&self, now: DateTime<Utc>) -> Self {
        Self {
            now: Some(now),
            ..self.clone()
        }
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    pub fn config(&self) -> &QueueConfig {
        &self.config
    }

    /// What this replica saw of the database's availability (shared by clones).
    pub fn outages(&self) -> &Outages {
        &self.outages
    }

    /// Registers a mall or changes its politeness limits. Holds across replicas at once: the
    /// claim statement reads them from the row.
    #[instrument(name = "queue.upsert_mall", skip_all, fields(mall = %limits.mall), err)]
    pub async fn upsert_mall(&self, limits: &MallLimits) -> Result<(), Error> {
        let max_running = limits
            .max_running
            .map(i32::try_from)
            .transpose()
            .map_err(|_| FieldError::new("max_running", "must be at most 10000"))?;
        let gap = i32::try_from(limits.min_start_gap.as_millis())
            .map_err(|_| FieldError::new("min_start_gap", "must be at most 24h"))?;
        spend::check_cap(limits.spend_cap_hourly_usd)
            .map_err(|reason| FieldError::new("spend_cap_hourly_usd", reason))?;
        sqlx::query_file!(
            "src/queue/sql/upsert_mall.sql",
            limits.mall.as_str(),
            limits.enabled,
            max_running,
            gap,
            limits.spend_cap_hourly_usd,
        )
        .fetch_one(&self.pool)
        .await
        .map_err(|e| Error::from_db(e, "max_running"))?;
        self.forget_limits();
        Ok(())
    }

    /// Accepts a search: its request row, its items, and a job per new (mall, product) key,
    /// all in one statement. An unknown or disabled mall rejects the whole request and stores
    /// nothing. A repeated idempotency key returns the first search (`replayed`).
    #[instrument(name = "queue.enqueue", skip_all, fields(products = req.products.len() as i64), err)]
    pub async fn enqueue(
        &self,
        req: &SearchRequest,
        ctx: &EnqueueContext,
    ) -> Result<Accepted, Error> {
        let malls = if req.malls.is_empty() {
            self.enabled_malls().await?
        } else {
            req.malls.clone()
        };
        if malls.is_empty() {
            return Err(FieldError::new("malls", "no mall is enabled").into());
        }
        let mut product_index = Vec::with_capacity(req.products.len() * malls.len());
        let mut mall = Vec::with_capacity(product_index.capacity());
        let mut code = Vec::with_capacity(product_index.capacity());
        let mut name = Vec::with_capacity(product_index.capacity());
        let mut key = Vec::with_capacity(product_index.capacity());
        let mut crawl_key = Vec::with_capacity(product_index.capacity());
        let mut hints_key = Vec::with_capacity(product_index.capacity());
        let mut brand = Vec::with_capacity(product_index.capacity());
        let mut model_code = Vec::with_capacity(product_index.capacity());
        let mut gtin = Vec::with_capacity(product_index.capacity());
        let mut revision = Vec::with_capacity(product_index.capacity());
        for (i, product) in req.products.iter().enumerate() {
            let identity = product.identity();
            let crawl = product.crawl_key();
            let hints = product.hints();
            for m in &malls {
                product_index.push(i32::try_from(i).unwrap_or(i32::MAX));
                mall.push(m.as_str().to_owned());
                code.push(product.code().map(str::to_owned));
                name.push(product.name().to_owned());
                key.push(identity.clone());
                crawl_key.push(crawl.clone());
                hints_key.push(product.hints_key());
                brand.push(hints.brand().map(str::to_owned));
                model_code.push(hints.model_code().map(str::to_owned));
                gtin.push(hints.gtin().map(str::to_owned));
                revision.push(
                    self.judge
                        .as_ref()
                        .map(|j| j.revision(m.as_str()).to_owned()),
                );
            }
        }
        let judge_version = self
            .judge
            .as_ref()
            .map(|j| i32::try_from(j.judge_version).unwrap_or(i32::MAX));
        let digest = request_digest(req);
        let destinations: Vec<String> = req.destinations.iter().map(|d| d.to_string()).collect();
        // NB: two calls with one new key race to insert it; the loser's statement fails on
        // the unique index and a second one finds the winner's search to replay.
        let mut tries = 0;
        let row = loop {
            tries += 1;
            let result = sqlx::query_file!(
                "src/queue/sql/enqueue.sql",
                i16::from(req.priority.get()),
                req.max_age.map(millis),
                req.idempotency_key.as_deref(),
                ctx.caller.as_deref(),
                ctx.traceparent.as_deref(),
                ctx.tracestate.as_deref(),
                &product_index,
                &mall,
                &code as &[Option<String>],
                &name,
                &key,
                i32::try_from(self.config.run_timeout.as_millis()).unwrap_or(i32::MAX),
                i16::try_from(self.config.max_attempts).unwrap_or(i16::MAX),
                self.now,
                ctx.client.as_str(),
                digest.as_str(),
                &destinations,
                req.notify_each_product,
                &hints_key as &[Option<String>],
                &brand as &[Option<String>],
                &model_code as &[Option<String>],
                &gtin as &[Option<String>],
                judge_version,
                &revision as &[Option<String>],
                &crawl_key,
                ctx.schedule_id,
            )
            .fetch_one(&self.pool)
            .await;
            match result {
                Ok(row) => break row,
                Err(sqlx::Error::Database(db))
                    if tries < 3
                        && db.is_unique_violation()
                        && db.constraint() == Some("search_request_client_key") => {}
                Err(e) => return Err(Error::from_db(e, "idempotency_key")),
            }
        };

        if let Some(unknown) = row.unknown_malls {
            let first = unknown.first().cloned().unwrap_or_default();
            let field = match req.malls.iter().position(|m| m.as_str() == first) {
                Some(i) => format!("malls[{i}]"),
                None => "malls".to_owned(),
            };
            return Err(
                FieldError::new(field, format!("unknown or disabled mall {first:?}")).into(),
            );
        }
        if let Some(search_id) = row.replay_of {
            // NB: a search stored before requests had digests replays whatever is asked.
            if row.replay_digest.is_some_and(|d| d != digest) {
                return Err(Error::KeyReused {
                    key: req.idempotency_key.clone().unwrap_or_default(),
                    what: "search",
                    id: search_id,
                });
            }
            let mut accepted = self.accepted_items(search_id).await?;
            accepted.replayed = true;
            return Ok(accepted);
        }
        let search_id = row
            .search_id
            .ok_or_else(|| Error::Internal("enqueue stored no search".into()))?;
        let items = product_index
            .iter()
            .zip(&mall)
            .zip(row.job_ids.iter().zip(&row.dispositions))
            .map(|((index, mall), (job_id, disposition))| {
                Ok(AcceptedItem {
                    product_index: usize::try_from(*index).unwrap_or_default(),
                    mall: MallId::new(mall.clone())?,
                    job_id: *job_id,
                    disposition: disposition.parse()?,
                })
            })
            .collect::<Result<Vec<_>, Error>>()?;
        Ok(Accepted {
            search_id,
            items,
            replayed: false,
        })
    }

    async fn enabled_malls(&self) -> Result<Vec<MallId>, Error> {
        let rows = sqlx::query_scalar!("select mall_id from mall where enabled order by mall_id")
            .fetch_all(&self.pool)
            .await?;
        rows.into_iter()
            .map(|m| MallId::new(m).map_err(Error::from))
            .collect()
    }

    /// The items of an already stored search.
    pub async fn accepted_items(&self, search_id: i64) -> Result<Accepted, Error> {
        let rows = sqlx::query!(
            r#"select product_index, mall, job_id, disposition::text as "disposition!"
               from search_item where search_id = $1 order by item_no"#,
            search_id
        )
        .fetch_all(&self.pool)
        .await?;
        if rows.is_empty() {
            return Err(Error::NotFound("search", search_id));
        }
        let items = rows
            .into_iter()
            .map(|r| {
                Ok(AcceptedItem {
                    product_index: usize::try_from(r.product_index).unwrap_or_default(),
                    mall: MallId::new(r.mall)?,
                    job_id: r.job_id,
                    disposition: r.disposition.parse()?,
                })
            })
            .collect::<Result<Vec<_>, Error>>()?;
        Ok(Accepted {
            search_id,
            items,
            replayed: false,
        })
    }

    /// Claims at most `n` queued jobs for `node`, of `malls` (`None`: every mall), in claim
    /// order, within each mall's cap and start gap.
    pub async fn claim(
        &self,
        node: &str,
        malls: Option<&[MallId]>,
        n: u32,
    ) -> Result<Vec<ClaimedJob>, Error> {
        Ok(self.settle(node, &[], malls, n).await?.claimed)
    }

    /// Whether any of `malls` (`None`: any mall) may have a cap or a start gap, from a read
    /// at most [`LIMITS_TTL`] old.
    async fn any_limited(&self, malls: Option<&[MallId]>) -> Result<bool, Error> {
        let cached = self
            .limited
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .filter(|(read_at, _)| read_at.elapsed() < LIMITS_TTL)
            .map(|(_, set)| Arc::clone(set));
        let limited = match cached {
            Some(set) => set,
            None => {
                let rows = sqlx::query_scalar!(
                    "select mall_id from mall
                     where enabled and (max_running is not null or min_start_gap_ms > 0)"
                )
                .fetch_all(&self.pool)
                .await?;
                let set = Arc::new(rows.into_iter().collect::<HashSet<_>>());
                *self
                    .limited
                    .0
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) =
                    Some((Instant::now(), Arc::clone(&set)));
                set
            }
        };
        Ok(match malls {
            None => !limited.is_empty(),
            Some(ms) => ms.iter().any(|m| limited.contains(m.as_str())),
        })
    }

    fn forget_limits(&self) {
        *self
            .limited
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// `claim.sql`, or its lean form `claim_unlimited.sql` when no mall in `malls` is
    /// `limited`, for the requests `nodes[k]` wants `counts[k]` jobs. Returns each job
    /// with its request's 1-based number.
    async fn claim_on(
        &self,
        db: impl sqlx::PgExecutor<'_>,
        nodes: &[String],
        counts: &[i32],
        malls: Option<&[String]>,
        limited: bool,
        now: Option<DateTime<Utc>>,
    ) -> Result<Vec<(i64, ClaimedJob)>, Error> {
        let ttl = millis(self.config.lease_ttl);
        let cap = self.config.spend_cap_hourly_usd;
        let port_wait = millis(CLAIM_PORT_WAIT);
        // Both statements take the same parameters and return the same columns.
        macro_rules! claim {
            ($file:literal) => {
                sqlx::query_file_as!(
                    ClaimRow, $file, nodes, malls, counts, ttl, now, cap, port_wait
                )
                .fetch_all(db)
                .await?
            };
        }
        let rows = if limited {
            claim!("src/queue/sql/claim.sql")
        } else {
            claim!("src/queue/sql/claim_unlimited.sql")
        };
        rows.into_iter()
            .map(|r| Ok((r.req, ClaimedJob::try_from(r)?)))
            .collect()
    }

    /// Renews the leases `node` still holds, never past their deadlines. Returns the renewed
    /// ones; a lease missing from the answer is lost and its job must stop.
    #[instrument(name = "queue.renew", skip_all, fields(node.id = %node, jobs = leases.len() as i64), err(level = "info"))]
    pub async fn renew_if_leased(
        &self,
        node: &str,
        leases: &[Lease],
    ) -> Result<Vec<Renewed>, Error> {
        let progress: Vec<(Lease, Option<u64>)> = leases.iter().map(|l| (*l, None)).collect();
        self.renew_reporting(node, &progress).await
    }

    /// [`Queue::renew_if_leased`] for a heartbeat's runs, each with the bytes it reported
    /// so far (`None`: not reported): kept as the lease's progress, which a run whose
    /// node vanishes is charged, marked estimated (`release_node.sql`, `reap.sql`).
    pub async fn renew_reporting(
        &self,
        node: &str,
        progress: &[(Lease, Option<u64>)],
    ) -> Result<Vec<Renewed>, Error> {
        if progress.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<i64> = progress.iter().map(|(l, _)| l.job_id).collect();
        let epochs: Vec<i64> = progress.iter().map(|(l, _)| l.epoch).collect();
        let bytes: Vec<Option<i64>> = progress
            .iter()
            .map(|(_, b)| b.map(|b| i64::try_from(b).unwrap_or(i64::MAX)))
            .collect();
        let rows = sqlx::query_file!(
            "src/queue/sql/renew.sql",
            node,
            &ids,
            &epochs,
            millis(self.config.lease_ttl),
            self.now,
            &bytes as &[Option<i64>],
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|r| Renewed {
                job_id: r.job_id,
                lease_until: r.lease_until,
            })
            .collect())
    }

    /// Completes one lease; [`Error::LeaseLost`] when it is no longer current (then nothing
    /// changed and the report is recorded as stale).
    pub async fn complete_if_leased(&self, node: &str, result: &JobResult) -> Result<(), Error> {
        let applied = self
            .complete_batch(node, std::slice::from_ref(result))
            .await?;
        match applied.first() {
            Some((_, true)) => Ok(()),
            _ => Err(Error::LeaseLost(result.lease)),
        }
    }

    /// Completes many leases in one statement. Returns each lease with whether it was
    /// applied (`false`: lost, recorded as stale). A lease listed twice is rejected.
    pub async fn complete_batch(
        &self,
        node: &str,
        results: &[JobResult],
    ) -> Result<Vec<(Lease, bool)>, Error> {
        Ok(self.settle(node, results, None, 0).await?.applied)
    }

    /// Completes `results` (as [`Queue::complete_batch`]) and claims at most `n` more jobs
    /// for `node` (as [`Queue::claim`]) in one transaction: one commit per finished job on
    /// the node path instead of two. The claim sees the slots the completion freed. Either
    /// both happen or neither (a database error leaves every lease as it was, and the node
    /// resends its report).
    pub async fn complete_and_claim(
        &self,
        node: &str,
        results: &[JobResult],
        malls: Option<&[MallId]>,
        n: u32,
    ) -> Result<CompletedAndClaimed, Error> {
        self.settle(node, results, malls, n).await
    }

    /// Every completion and claim goes through here: the request joins the next batch of
    /// completions and claims (`settle.rs`), which other callers' requests may share.
    async fn settle(
        &self,
        node: &str,
        results: &[JobResult],
        malls: Option<&[MallId]>,
        n: u32,
    ) -> Result<CompletedAndClaimed, Error> {
        let span = if results.is_empty() {
            info_span!("queue.claim", node.id = %node, n = i64::from(n))
        } else {
            info_span!("queue.complete", node.id = %node, jobs = results.len() as i64, n = i64::from(n))
        };
        let mut reported = CompleteColumns::with_capacity(results.len());
        let mut seen = HashSet::with_capacity(results.len());
        for (i, result) in results.iter().enumerate() {
            if !seen.insert(result.lease.job_id) {
                return Err(FieldError::new(format!("results[{i}].job_id"), "listed twice").into());
            }
            reported.push(result, node)?;
        }
        let claim = if n == 0 {
            None
        } else {
            Some(settle::ClaimWanted {
                malls: malls.map(|ms| ms.iter().map(|m| m.as_str().to_owned()).collect()),
                n: i32::try_from(n).unwrap_or(i32::MAX),
                // Read before the batch: a transaction must not wait for a second connection.
                limited: self.any_limited(malls).instrument(span.clone()).await?,
            })
        };
        if reported.is_empty() && claim.is_none() {
            return Ok(CompletedAndClaimed {
                applied: Vec::new(),
                claimed: Vec::new(),
            });
        }
        let (reply, answer) = oneshot::channel();
        let request = settle::Request {
            node: node.to_owned(),
            leases: results.iter().map(|r| r.lease).collect(),
            reported,
            claim,
            now: self.now,
            span: span.clone(),
            reply,
        };
        self.settle_request(request, answer).instrument(span).await
    }

    /// `complete.sql` over `reported`: each job with whether its completion applied.
    async fn complete_on(
        &self,
        db: impl sqlx::PgExecutor<'_>,
        reported: &CompleteColumns,
        now: Option<DateTime<Utc>>,
    ) -> Result<Vec<(i64, bool)>, Error> {
        let c = reported;
        let rows = sqlx::query_file!(
            "src/queue/sql/complete.sql",
            &c.job_id,
            &c.epoch,
            &c.outcome as &[Outcome],
            &c.rounds,
            &c.bytes,
            &c.cost,
            &c.offer_job,
            &c.offer_rank,
            &c.offer_title,
            &c.offer_price,
            &c.offer_shipping,
            &c.offer_url,
            &c.offer_seller,
            &c.offer_score,
            &c.node,
            millis(self.config.negative_ttl_no_results),
            now,
            &c.offer_shipping_status,
            &c.offer_list_price,
            &c.offer_flags,
            &c.not_found_kind as &[Option<String>],
            &c.judge_version as &[Option<i32>],
            &c.vocabulary_revision as &[Option<String>],
            millis(self.config.negative_ttl_judged),
        )
        .fetch_all(db)
        .await?;
        Ok(rows.into_iter().map(|r| (r.job_id, r.applied)).collect())
    }

    /// Fails one attempt: retried after backoff while the class is retryable and attempts
    /// are left, else dead. [`Error::LeaseLost`] when the lease is no longer current. The
    /// failure's metrics are recorded on the attempt either way ([`Queue::record_spend`]).
    #[instrument(name = "queue.fail", skip_all, fields(job.id = failure.lease.job_id, class = failure.class.as_str()), err(level = "info"))]
    pub async fn fail_if_leased(&self, node: &str, failure: &JobFailure) -> Result<Failed, Error> {
        let evidence = failure
            .evidence
            .as_ref()
            .map(serde_json::to_value)
            .transpose()
            .map_err(|e| Error::Internal(format!("page evidence does not serialise: {e}")))?;
        let row = sqlx::query_file!(
            "src/queue/sql/fail.sql",
            failure.lease.job_id,
            failure.lease.epoch,
            failure.class as ErrorClass,
            failure.class.is_retryable(),
            failure.message,
            millis(self.config.backoff_base) as f64,
            millis(self.config.backoff_cap) as f64,
            i64::try_from(failure.metrics.bytes()).unwrap_or(i64::MAX),
            failure.metrics.cost_usd,
            node,
            self.now,
            evidence,
        )
        .fetch_optional(&self.pool)
        .await?;
        // Applied or not, the run spent what it spent: recorded on its attempt.
        self.record_spend(node, failure.lease, &failure.metrics)
            .await?;
        let row = row.ok_or(Error::LeaseLost(failure.lease))?;
        Ok(Failed {
            mall: MallId::new(row.mall)?,
            state: row.state,
            attempts: u32::try_from(row.attempts).unwrap_or_default(),
            run_after: row.run_after,
        })
    }

    /// Hands a lease back (a draining node will not finish it): queued again at once, no
    /// attempt or reclaim counted.
    pub async fn hand_back_if_leased(&self, node: &str, lease: Lease) -> Result<(), Error> {
        self.hand_back_until(node, lease, None).await
    }

    /// [`Queue::hand_back_if_leased`], the job to run again at `not_before` (at most 5
    /// minutes away): a node that could not get a proxy port gives the job back until the
    /// ledger expects one to be free, and no attempt is spent on waiting.
    #[instrument(name = "queue.hand_back", skip_all, fields(job.id = lease.job_id, node.id = %node), err(level = "info"))]
    pub async fn hand_back_until(
        &self,
        node: &str,
        lease: Lease,
        not_before: Option<DateTime<Utc>>,
    ) -> Result<(), Error> {
        sqlx::query_file!(
            "src/queue/sql/hand_back.sql",
            lease.job_id,
            lease.epoch,
            node,
            self.now,
            not_before,
        )
        .fetch_optional(&self.pool)
        .await?
        .map(|_| ())
        .ok_or(Error::LeaseLost(lease))
    }

    /// Takes back every running job of a node whose stream is gone, except `keep` (leases a
    /// reconnect re-attached). A reclaim, not an attempt; the poison guard dead-letters a job
    /// that keeps losing its node.
    #[instrument(name = "queue.release_node", skip_all, fields(node.id = %node), err)]
    pub async fn release_node(&self, node: &str, keep: &[Lease]) -> Result<Vec<Released>, Error> {
        self.release(node, keep, None).await
    }

    /// [`Queue::release_node`] after a grace period: only while `stream` is still the
    /// node's latest stream and disconnected (a node that reconnected keeps its jobs).
    #[instrument(name = "queue.release_lost_node", skip_all, fields(node.id = %node), err)]
    pub async fn release_lost_node(
        &self,
        node: &str,
        stream: uuid::Uuid,
    ) -> Result<Vec<Released>, Error> {
        self.release(node, &[], Some(stream)).await
    }

    async fn release(
        &self,
        node: &str,
        keep: &[Lease],
        stream: Option<uuid::Uuid>,
    ) -> Result<Vec<Released>, Error> {
        let (ids, epochs): (Vec<i64>, Vec<i64>) = keep.iter().map(|l| (l.job_id, l.epoch)).unzip();
        let rows = sqlx::query_file!(
            "src/queue/sql/release_node.sql",
            node,
            &ids,
            &epochs,
            self.now,
            stream,
            self.config.proxy_usd_per_gb,
            millis(self.config.backoff_base) as f64,
            millis(self.config.backoff_cap) as f64,
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|r| Released {
                job_id: r.job_id,
                state: r.state,
            })
            .collect())
    }

    /// Of `leases` (listed by a reconnecting node), the ones `node` still holds, each
    /// renewed for a lease TTL (never past its deadline): the time the node spent away —
    /// its coordinator gone, the database down — does not count against them.
    #[instrument(name = "queue.reattach", skip_all, fields(node.id = %node), err)]
    pub async fn reattach(&self, node: &str, leases: &[Lease]) -> Result<Vec<Lease>, Error> {
        let (ids, epochs): (Vec<i64>, Vec<i64>) =
            leases.iter().map(|l| (l.job_id, l.epoch)).unzip();
        let rows = sqlx::query_file!(
            "src/queue/sql/reattach.sql",
            node,
            &ids,
            &epochs,
            millis(self.config.lease_ttl),
            self.now
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|r| Lease {
                job_id: r.job_id,
                epoch: r.lease_epoch,
            })
            .collect())
    }

    /// Ends runs whose lease expired or that reached their hard deadline (one batch).
    pub async fn reap(&self) -> Result<Vec<Reaped>, Error> {
        self.reap_pass(true).await
    }

    /// [`Queue::reap`], ending expired leases only when `leases` (the reaper holds them
    /// back for a lease TTL after a database outage; deadlines are always enforced).
    ///
    /// Also this replica's outage probe ([`Queue::outages`]): a failed pass, or one that
    /// waited longer than [`Queue::stall_limit`] for a connection or for the statement to
    /// run, marks the database down and ends no lease (whatever held the pass back held
    /// the renewals back too); a prompt pass marks it reachable.
    #[instrument(name = "queue.reap", skip_all, err)]
    pub async fn reap_pass(&self, leases: bool) -> Result<Vec<Reaped>, Error> {
        let started = Instant::now();
        let conn = self.pool.acquire().await;
        let mut conn = match conn {
            Ok(conn) if started.elapsed() <= self.stall_limit() => conn,
            Ok(_) => {
                self.outages.failed();
                return Ok(Vec::new());
            }
            Err(e) => {
                self.outages.failed();
                return Err(e.into());
            }
        };
        // NB: a read of the clock touches no table, so no lock holds it back.
        let issued = sqlx::query_scalar!(r#"select clock_timestamp() as "now!""#)
            .fetch_one(&mut *conn)
            .await;
        let rows = match issued {
            Ok(issued) => {
                sqlx::query_file!(
                    "src/queue/sql/reap.sql",
                    millis(self.config.backoff_base) as f64,
                    millis(self.config.backoff_cap) as f64,
                    i32::try_from(self.config.reap_batch).unwrap_or(i32::MAX),
                    self.now,
                    leases,
                    issued,
                    millis(self.stall_limit()),
                    self.config.proxy_usd_per_gb,
                )
                .fetch_all(&mut *conn)
                .await
            }
            Err(e) => Err(e),
        };
        let rows = match rows {
            Ok(rows) if started.elapsed() <= self.stall_limit() => {
                self.outages.reached();
                rows
            }
            Ok(rows) => {
                // NB: the statement itself ended no lease if it waited (see reap.sql); what
                // it ended are deadlines.
                self.outages.failed();
                self.outages.reached();
                rows
            }
            Err(e) => {
                self.outages.failed();
                return Err(e.into());
            }
        };
        Ok(rows
            .into_iter()
            .map(|r| Reaped {
                job_id: r.job_id,
                state: r.state,
                class: r.error_class,
            })
            .collect())
    }

    /// A database round trip slower than this counts as an outage: a quarter of the lease
    /// TTL, which leaves a renewed lease (TTL at least five heartbeats) time to spare.
    pub fn stall_limit(&self) -> Duration {
        self.config.lease_ttl / 4
    }

    /// The queue's figures of the ops snapshot.
    #[instrument(name = "queue.ops", skip_all, err)]
    pub async fn ops(&self) -> Result<QueueOps, Error> {
        let r = sqlx::query_file!("src/queue/sql/ops.sql", self.now)
            .fetch_one(&self.pool)
            .await?;
        let layout: HashMap<String, (i64, i64)> = sqlx::query_file!(
            "src/queue/sql/mall_layout.sql",
            self.now,
            millis(LAYOUT_SHARE_WINDOW)
        )
        .fetch_all(&self.pool)
        .await?
        .into_iter()
        .map(|l| (l.mall, (l.finished, l.layout)))
        .collect();
        let malls = sqlx::query_file!("src/queue/sql/mall_ops.sql", self.now)
            .fetch_all(&self.pool)
            .await?
            .into_iter()
            .map(|m| {
                let (finished, layout) = layout.get(&m.mall).copied().unwrap_or_default();
                MallQueueOps {
                    queued: m.queued,
                    running: m.running,
                    max_running: m.max_running.and_then(|v| u32::try_from(v).ok()),
                    min_start_gap: Duration::from_millis(
                        u64::try_from(m.min_start_gap_ms).unwrap_or_default(),
                    ),
                    finished_15m: finished,
                    layout_failures_15m: layout,
                    spend_usd_last_hour: m.spend_usd_last_hour,
                    spend_cap_hourly_usd: m.spend_cap_hourly_usd,
                    spend_capped: spend_capped(m.spend_usd_last_hour, m.spend_cap_hourly_usd),
                    mall: m.mall,
                }
            })
            .collect();
        Ok(QueueOps {
            queued: r.queued,
            running: r.running,
            done: r.done,
            dead: r.dead,
            cancelled: r.cancelled,
            oldest_queued: r
                .oldest_queued_secs
                .map(|s| Duration::from_secs_f64(s.max(0.0))),
            dead_last_hour: r.dead_last_hour,
            stuck_running: r.stuck_running,
            deadline_kills_last_hour: r.deadline_kills_last_hour,
            cost_usd_last_hour: r.cost_usd_last_hour,
            spend_cap_hourly_usd: self.config.spend_cap_hourly_usd,
            spend_capped: spend_capped(r.cost_usd_last_hour, self.config.spend_cap_hourly_usd),
            malls,
        })
    }
}

/// Column-wise arrays for `complete.sql`.
#[derive(Default)]
struct CompleteColumns {
    job_id: Vec<i64>,
    node: Vec<String>,
    epoch: Vec<i64>,
    outcome: Vec<Outcome>,
    rounds: Vec<serde_json::Value>,
    bytes: Vec<i64>,
    cost: Vec<f64>,
    /// `NotFoundKind::as_str` of a not-found, else `None`.
    not_found_kind: Vec<Option<String>>,
    /// What judged the cards (`None`: the node did not say).
    judge_version: Vec<Option<i32>>,
    vocabulary_revision: Vec<Option<String>>,
    offer_job: Vec<i64>,
    offer_rank: Vec<i16>,
    offer_title: Vec<String>,
    offer_price: Vec<i64>,
    offer_shipping: Vec<i64>,
    offer_url: Vec<String>,
    offer_seller: Vec<String>,
    offer_score: Vec<f32>,
    offer_shipping_status: Vec<String>,
    offer_list_price: Vec<i64>,
    /// `CardClass::as_str` names joined by `,` (`complete.sql` splits them).
    offer_flags: Vec<String>,
}

impl CompleteColumns {
    fn with_capacity(n: usize) -> Self {
        Self {
            job_id: Vec::with_capacity(n),
            node: Vec::with_capacity(n),
            epoch: Vec::with_capacity(n),
            outcome: Vec::with_capacity(n),
            rounds: Vec::with_capacity(n),
            bytes: Vec::with_capacity(n),
            cost: Vec::with_capacity(n),
            not_found_kind: Vec::with_capacity(n),
            judge_version: Vec::with_capacity(n),
            vocabulary_revision: Vec::with_capacity(n),
            ..Self::default()
        }
    }

    fn is_empty(&self) -> bool {
        self.job_id.is_empty()
    }

    /// Whether a reported run spent anything (`spend.sql` has something to record).
    fn spent_any(&self) -> bool {
        self.bytes.iter().any(|&b| b > 0) || self.cost.iter().any(|&c| c > 0.0)
    }

    /// `r`, reported by `node`.
    fn push(&mut self, r: &JobResult, node: &str) -> Result<(), Error> {
        // NB: the model refuses such an offer off the wire; one built in-process is refused
        // here, as invalid input (a rejected report), before the table's check would make
        // it a database error (which ends a node's stream, and the node resends it).
        if let Some(i) = r
            .offers
            .iter()
            .position(|o| !o.shipping.is_known() && o.shipping_fee != 0)
        {
            return Err(FieldError::new(
                format!("offers[{i}].shipping_fee"),
                "must be 0 when shipping is UNKNOWN",
            )
            .into());
        }
        self.job_id.push(r.lease.job_id);
        self.node.push(node.to_owned());
        self.epoch.push(r.lease.epoch);
        self.outcome.push(r.outcome);
        self.rounds
            .push(serde_json::to_value(&r.rounds).map_err(|e| Error::Internal(e.to_string()))?);
        self.bytes
            .push(i64::try_from(r.metrics.bytes()).unwrap_or(i64::MAX));
        self.cost.push(r.metrics.cost_usd);
        self.not_found_kind
            .push(r.not_found_kind().map(|k| k.as_str().to_owned()));
        let judged = r.judged_with.is_known().then_some(&r.judged_with);
        self.judge_version
            .push(judged.map(|j| i32::try_from(j.judge_version).unwrap_or(i32::MAX)));
        self.vocabulary_revision
            .push(judged.map(|j| j.vocabulary_revision.clone()));
        let mut offers: Vec<_> = r.offers.iter().collect();
        offers.sort_by_key(|o| offer_order(o));
        for (rank, o) in offers.into_iter().enumerate() {
            self.offer_job.push(r.lease.job_id);
            self.offer_rank
                .push(i16::try_from(rank).unwrap_or(i16::MAX));
            self.offer_title.push(o.title.clone());
            self.offer_price.push(o.price);
            self.offer_shipping.push(o.shipping_fee);
            self.offer_url.push(o.url.clone());
            self.offer_seller.push(o.seller.clone());
            self.offer_score.push(o.match_score);
            self.offer_shipping_status
                .push(o.shipping.as_str().to_owned());
            self.offer_list_price.push(o.list_price);
            self.offer_flags.push(
                o.flags
                    .iter()
                    .map(|f| f.as_str())
                    .collect::<Vec<_>>()
                    .join(","),
            );
        }
        Ok(())
    }

    /// Appends `other`'s jobs and offers.
    fn extend(&mut self, other: &Self) {
        self.job_id.extend_from_slice(&other.job_id);
        self.node.extend_from_slice(&other.node);
        self.epoch.extend_from_slice(&other.epoch);
        self.outcome.extend_from_slice(&other.outcome);
        self.rounds.extend_from_slice(&other.rounds);
        self.bytes.extend_from_slice(&other.bytes);
        self.cost.extend_from_slice(&other.cost);
        self.not_found_kind.extend_from_slice(&other.not_found_kind);
        self.judge_version.extend_from_slice(&other.judge_version);
        self.vocabulary_revision
            .extend_from_slice(&other.vocabulary_revision);
        self.offer_job.extend_from_slice(&other.offer_job);
        self.offer_rank.extend_from_slice(&other.offer_rank);
        self.offer_title.extend_from_slice(&other.offer_title);
        self.offer_price.extend_from_slice(&other.offer_price);
        self.offer_shipping.extend_from_slice(&other.offer_shipping);
        self.offer_url.extend_from_slice(&other.offer_url);
        self.offer_seller.extend_from_slice(&other.offer_seller);
        self.offer_score.extend_from_slice(&other.offer_score);
        self.offer_shipping_status
            .extend_from_slice(&other.offer_shipping_status);
        self.offer_list_price
            .extend_from_slice(&other.offer_list_price);
        self.offer_flags.extend_from_slice(&other.offer_flags);
    }
}

/// The order offers are ranked and shown in: cheapest effective price first; at the same
/// effective price an offer whose shipping is known before one whose shipping is not (its
/// effective price is only a lower bound), then the lower fee. The read side's SQL orders
/// by the same key (`effective_price, shipping_status = 'unknown', shipping_fee, rank`).
fn offer_order(o: &lps_proto::model::Offer) -> (i64, bool, i64) {
    (o.effective_price(), !o.shipping.is_known(), o.shipping_fee)
}

/// A job's stored hints (columns of migration 0023), valid as they were on receive.
pub(crate) fn stored_hints(
    brand: Option<String>,
    model_code: Option<String>,
    gtin: Option<String>,
) -> Result<ProductHints, FieldError> {
    ProductHints::new(
        brand.as_deref().unwrap_or_default(),
        model_code.as_deref().unwrap_or_default(),
        gtin.as_deref().unwrap_or_default(),
    )
}

/// A row of `claim.sql` and `claim_unlimited.sql`.
struct ClaimRow {
    /// The 1-based number of the request the job was claimed for.
    req: i64,
    job_id: i64,
    lease_epoch: i64,
    mall: String,
    product_code: Option<String>,
    product_name: String,
    product_brand: Option<String>,
    product_model_code: Option<String>,
    product_gtin: Option<String>,
    priority: i16,
    attempts: i16,
    max_attempts: i16,
    reclaims: i16,
    created_at: DateTime<Utc>,
    run_started_at: DateTime<Utc>,
    deadline_at: DateTime<Utc>,
    lease_until: DateTime<Utc>,
    traceparent: Option<String>,
    tracestate: Option<String>,
}

impl TryFrom<ClaimRow> for ClaimedJob {
    type Error = Error;

    fn try_from(r: ClaimRow) -> Result<Self, Error> {
        Ok(Self {
            lease: Lease {
                job_id: r.job_id,
                epoch: r.lease_epoch,
            },
            mall: MallId::new(r.mall)?,
            product_code: r.product_code,
            product_name: r.product_name,
            hints: stored_hints(r.product_brand, r.product_model_code, r.product_gtin)?,
            priority: u8::try_from(r.priority).unwrap_or(u8::MAX),
            attempt: u32::try_from(r.attempts).unwrap_or_default() + 1,
            max_attempts: u32::try_from(r.max_attempts).unwrap_or_default(),
            reclaims: u32::try_from(r.reclaims).unwrap_or_default(),
            created_at: r.created_at,
            run_started_at: r.run_started_at,
            deadline_at: r.deadline_at,
            lease_until: r.lease_until,
            traceparent: r.traceparent,
            tracestate: r.tracestate,
        })
    }
}
