//! The seam between the node protocol and whatever runs a job: the [`Executor`] trait, the
//! [`Job`] it is given, the [`Progress`] it reports while it runs and the [`Outcome`] it
//! ends with.
//!
//! The node owns everything around a run: slots, the hard deadline, cancellation, reports.
//! An executor only runs one job per call and returns how it ended. Rules for
//! implementations:
//! - `run` must return soon after `cancel` fires: the node waits at most [`STOP_GRACE`]
//!   and then drops the future, which skips any cleanup that needs an `.await`. The slot
//!   stays taken until then. What it returns after a cancel is ignored.
//! - It must not enforce the job's deadline itself: the node cancels it at the deadline and
//!   reports `DEADLINE`. (An executor may use the deadline to decide, e.g. whether there is
//!   time to rotate an IP, and may stop shortly *after* it as a backstop.)
//! - `Progress` is cheap to update (atomics); it is read for every heartbeat, and it is what
//!   the node reports as spent when a run ends without returning (killed at the deadline,
//!   stopped, handed back), priced by [`cost_usd`] like a finished run.
//!
//! [`BrowserExecutor`] drives headless Chromium; [`ScriptedExecutor`] is the test one.

use std::{
    fmt,
    sync::{
        Arc,
        atomic::{AtomicU32, AtomicU64, Ordering},
    },
    time::Duration,
};

use chrono::{DateTime, Utc};
use lps_profiles::vocabulary::Lexicon;
use lps_proto::{
    model::{ErrorClass, JobMetrics, JudgedWith, Lease, MallId, Offer, ProductSpec, RoundReport},
    pb,
};
use tokio_util::sync::CancellationToken;

pub mod browser;
pub mod scripted;

pub use browser::BrowserExecutor;
pub use scripted::ScriptedExecutor;

/// How long the node waits for [`Executor::run`] to return after cancelling it, before it
/// drops the run and frees the slot.
// NB: longer than the browser executor's own 60 s close timeout, so the executor, not the
// node, decides how a browser close ends.
pub const STOP_GRACE: Duration = Duration::from_secs(70);

/// One leased job, as the coordinator assigned it (validated on receive).
#[derive(Clone)]
pub struct Job {
    /// The job and the epoch of this claim; reports speak for exactly this lease.
    pub lease: Lease,
    pub product: ProductSpec,
    pub mall: MallId,
    /// 1-based number of this attempt.
    pub attempt: u32,
    pub max_attempts: u32,
    /// The hard deadline (coordinator clock). The node enforces it.
    pub deadline: DateTime<Utc>,
    /// W3C trace context of the Search call that created the job.
    pub traceparent: Option<String>,
    pub tracestate: Option<String>,
    /// The mall's site profile from the latest Welcome, if the coordinator sent one.
    // NB: a wire type until lps-proto has a validated SiteProfile model.
    pub profile: Option<Arc<pb::SiteProfile>>,
    /// The judge's vocabulary for this mall (the coordinator's plus the profile's words).
    pub lexicon: Arc<Lexicon>,
    /// This build's judge and the revision of `lexicon`'s words, reported with the result.
    pub judged_with: JudgedWith,
    /// The coordinator's limits from the latest Welcome (defaults if it sent none).
    pub limits: pb::Limits,
}

impl Job {
    pub fn job_id(&self) -> i64 {
        self.lease.job_id
    }
}

impl fmt::Debug for Job {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Job")
            .field("lease", &self.lease)
            .field("product", &self.product)
            .field("mall", &self.mall)
            .field("attempt", &self.attempt)
            .field("deadline", &self.deadline)
            .field("profile", &self.profile.as_ref().map(|p| p.id.as_str()))
            .finish_non_exhaustive()
    }
}

/// What a run cost in USD: the bytes it moved through the proxy at the coordinator's price
/// per GB (`Limits.proxy_usd_per_gb`), plus what its LLM calls cost. The one rule for every
/// way a run ends — finished, failed, killed at the deadline, stopped, handed back. Never
/// negative or NaN.
pub fn cost_usd(bytes: u64, usd_per_gb: f64, llm_usd: f64) -> f64 {
    #[allow(clippy::cast_precision_loss)] // bytes far below 2^52
    let usd = bytes as f64 * usd_per_gb / 1e9 + llm_usd;
    if usd.is_finite() && usd > 0.0 {
        usd
    } else {
        0.0
    }
}

/// Where a running job is: the node copies it into every heartbeat. Cloning shares it.
#[derive(Debug, Clone, Default)]
pub struct Progress(Arc<ProgressCells>);

#[derive(Debug, Default)]
struct ProgressCells {
    round: AtomicU32,
    pages_loaded: AtomicU32,
    bytes: AtomicU64,
    llm_calls: AtomicU32,
    /// USD of the LLM calls so far, as `f64` bits.
    llm_usd: AtomicU64,
}

/// A copy of [`Progress`] at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProgressSnapshot {
    /// 1-based query round in progress (0 before the first).
    pub round: u32,
    pub pages_loaded: u32,
    pub bytes: u64,
    pub llm_calls: u32,
    pub llm_usd: f64,
}

impl ProgressSnapshot {
    /// What the run has spent so far, `elapsed` after it started, with proxy traffic at
    /// `usd_per_gb` ([`cost_usd`]). Bytes count as received (the progress does not split them).
    pub fn spent(&self, usd_per_gb: f64, elapsed: Duration) -> JobMetrics {
        JobMetrics {
            bytes_in: self.bytes,
            elapsed,
            cost_usd: cost_usd(self.bytes, usd_per_gb, self.llm_usd),
            llm_calls: self.llm_calls,
            pages_loaded: self.pages_loaded,
            ..JobMetrics::default()
        }
    }
}

impl Progress {
    pub fn new() -> Self {
        Self::default()
    }

    /// The 1-based query round now in progress.
    pub fn set_round(&self, round: u32) {
        self.0.round.store(round, Ordering::Relaxed);
    }

    /// One more page loaded.
    pub fn page_loaded(&self) {
        self.0.pages_loaded.fetch_add(1, Ordering::Relaxed);
    }

    /// Bytes moved through the job's proxy relay.
    pub fn add_bytes(&self, bytes: u64) {
        self.0.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// One more LLM call, costing `usd`.
    pub fn llm_call(&self, usd: f64) {
        self.0.llm_calls.fetch_add(1, Ordering::Relaxed);
        let _ = self
            .0
            .llm_usd
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| {
                Some((f64::from_bits(bits) + usd).to_bits())
            });
    }

    pub fn snapshot(&self) -> ProgressSnapshot {
        ProgressSnapshot {
            round: self.0.round.load(Ordering::Relaxed),
            pages_loaded: self.0.pages_loaded.load(Ordering::Relaxed),
            bytes: self.0.bytes.load(Ordering::Relaxed),
            llm_calls: self.0.llm_calls.load(Ordering::Relaxed),
            llm_usd: f64::from_bits(self.0.llm_usd.load(Ordering::Relaxed)),
        }
    }
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Offers judged to be the product. Needs at least one offer (an empty list is
    /// reported as an `INTERNAL` failure); the cheapest 100 are kept.
    Found {
        offers: Vec<Offer>,
        rounds: Vec<RoundReport>,
        metrics: JobMetrics,
    },
    /// A healthy result page with no match in any round: a final answer.
    NotFound {
        rounds: Vec<RoundReport>,
        metrics: JobMetrics,
    },
    /// The attempt failed; `class` decides retry or dead-letter.
    Failed {
        class: ErrorClass,
        message: String,
        metrics: JobMetrics,
        /// The last blocked or unreadable page of the run, when one was kept.
        evidence: Option<Box<lps_proto::model::PageEvidence>>,
    },
    /// The run could not go on for want of something the coordinator rations (a proxy
    /// port): the job is handed back to run again at `not_before` (`None`: at once) and no
    /// attempt is spent on the wait.
    Deferred {
        reason: String,
        not_before: Option<chrono::DateTime<chrono::Utc>>,
        metrics: JobMetrics,
    },
}

/// Runs jobs. One call runs one job; calls for different jobs run concurrently (one per
/// slot).
#[async_trait::async_trait]
pub trait Executor: Send + Sync + 'static {
    /// Runs `job` to its end, or until `cancel` fires (then returns soon; the value is
    /// ignored).
    async fn run(&self, job: Job, progress: Progress, cancel: CancellationToken) -> Outcome;

    /// The node is draining and no job runs any more: give back what is held between jobs
    /// (the browser executor ends its IP sessions, whose releases are then acked before
    /// Goodbye). Called at most once per node run; the default does nothing.
    async fn drain(&self) {}

    /// Whether the executor could run a job now (`/readyz`): e.g. the browser executor's
    /// chromedriver is not down. Cheap and non-blocking; the default is always ready.
    fn is_ready(&self) -> bool {
        true
    }

    /// Whether the node should offer its free slots at all: false while the browser
    /// self-check has not passed (a browser that gives itself away would only burn exit
    /// IPs). The node announces 0 free slots until this turns true. Default: true.
    fn accepts_jobs(&self) -> bool {
        true
    }
}

#[async_trait::async_trait]
impl<E: Executor + ?Sized> Executor for Arc<E> {
    async fn run(&self, job: Job, progress: Progress, cancel: CancellationToken) -> Outcome {
        (**self).run(job, progress, cancel).await
    }

    async fn drain(&self) {
        (**self).drain().await;
    }

    fn is_ready(&self) -> bool {
        (**self).is_ready()
    }

    fn accepts_jobs(&self) -> bool {
        (**self).accepts_jobs()
    }
}
