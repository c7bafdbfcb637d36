//! Values the queue hands out: claimed jobs, accepted searches and transition outcomes.

use std::{str::FromStr, time::Duration};

use chrono::{DateTime, Utc};
use lps_proto::model::{ErrorClass, FieldError, JobState, Lease, MallId, ProductHints};

/// Who asked, and the trace the jobs belong to.
#[derive(Debug, Clone, Default)]
pub struct EnqueueContext {
    /// The client the search belongs to (its token's name); scopes the idempotency key.
    pub client: String,
    /// The calling service's own label (`x-lps-caller`, else its address).
    pub caller: Option<String>,
    pub traceparent: Option<String>,
    pub tracestate: Option<String>,
    /// The schedule whose run the search is (`None`: a caller's own search); its price
    /// history entries name it.
    pub schedule_id: Option<i64>,
}

/// What happened to one (product, mall) item of a search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// A new job was queued.
    Queued,
    /// An active job with the same key was joined (priority raised if needed).
    Joined,
    /// Answered from a stored result fresher than `max_age`.
    CachedResult,
    /// Answered from the negative cache.
    CachedNotFound,
}

impl FromStr for Disposition {
    type Err = FieldError;

    fn from_str(s: &str) -> Result<Self, FieldError> {
        match s {
            "queued" => Ok(Self::Queued),
            "joined" => Ok(Self::Joined),
            "cached_result" => Ok(Self::CachedResult),
            "cached_not_found" => Ok(Self::CachedNotFound),
            other => Err(FieldError::new(
                "disposition",
                format!("unknown value {other:?}"),
            )),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcceptedItem {
    pub product_index: usize,
    pub mall: MallId,
    pub job_id: i64,
    pub disposition: Disposition,
}

/// A stored search.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accepted {
    pub search_id: i64,
    pub items: Vec<AcceptedItem>,
    /// The idempotency key was seen before; these are the first request's items.
    pub replayed: bool,
}

/// What [`Queue::complete_and_claim`](super::Queue::complete_and_claim) did: each lease
/// with whether its completion applied (`false`: stale), and the jobs claimed in the same
/// transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompletedAndClaimed {
    pub applied: Vec<(Lease, bool)>,
    pub claimed: Vec<ClaimedJob>,
}

/// A job leased to a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedJob {
    pub lease: Lease,
    pub mall: MallId,
    pub product_code: Option<String>,
    pub product_name: String,
    /// The caller's hints, sent to the node with the product.
    pub hints: ProductHints,
    pub priority: u8,
    /// 1-based number of this attempt.
    pub attempt: u32,
    pub max_attempts: u32,
    pub reclaims: u32,
    pub created_at: DateTime<Utc>,
    pub run_started_at: DateTime<Utc>,
    pub deadline_at: DateTime<Utc>,
    pub lease_until: DateTime<Utc>,
    pub traceparent: Option<String>,
    pub tracestate: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Renewed {
    pub job_id: i64,
    pub lease_until: DateTime<Utc>,
}

/// Where a failed attempt left its job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failed {
    /// The job's mall (for the per-mall failure counters).
    pub mall: MallId,
    /// `Queued` (retry at `run_after`) or `Dead`.
    pub state: JobState,
    pub attempts: u32,
    pub run_after: DateTime<Utc>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Released {
    pub job_id: i64,
    /// `Queued`, or `Dead` by the poison guard.
    pub state: JobState,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reaped {
    pub job_id: i64,
    pub state: JobState,
    /// `Deadline` or `LeaseExpired`.
    pub class: ErrorClass,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cancelled {
    pub lease: Lease,
    /// The state before cancelling: `Queued` or `Running`.
    pub was: JobState,
    /// The node that was running it.
    pub node: Option<String>,
}

/// A mall's politeness limits.
#[derive(Debug, Clone, PartialEq)]
pub struct MallLimits {
    pub mall: MallId,
    pub enabled: bool,
    /// Deployment-wide cap on running jobs; `None`: no cap.
    pub max_running: Option<u32>,
    /// Minimum time between two job starts; zero: none.
    pub min_start_gap: Duration,
    /// Deployment-wide cap on what the mall's attempts may cost per rolling hour, USD;
    /// `None`: no cap. Reached, no job of the mall is claimed until the hour frees up.
    pub spend_cap_hourly_usd: Option<f64>,
}

impl MallLimits {
    /// An enabled mall without limits.
    pub fn unlimited(mall: MallId) -> Self {
        Self {
            mall,
            enabled: true,
            max_running: None,
            min_start_gap: Duration::ZERO,
            spend_cap_hourly_usd: None,
        }
    }
}

/// Whether `spend` has reached `cap`: the claim statements then claim nothing for that
/// scope (they claim while `spend < cap`).
pub fn spend_capped(spend: f64, cap: Option<f64>) -> bool {
    cap.is_some_and(|cap| spend >= cap)
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct MallQueueOps {
    pub mall: String,
    pub queued: i64,
    pub running: i64,
    pub max_running: Option<u32>,
    pub min_start_gap: Duration,
    /// Attempts the nodes finished (a result or a failure) in the last
    /// [`LAYOUT_SHARE_WINDOW`](super::LAYOUT_SHARE_WINDOW).
    pub finished_15m: i64,
    /// Of those, the ones that failed as `layout` (the mall's markup changed).
    pub layout_failures_15m: i64,
    /// What the mall's attempts cost in the rolling hour, USD ([`SPEND_WINDOW`](super::SPEND_WINDOW)).
    pub spend_usd_last_hour: f64,
    /// The mall's hourly spend cap; `None`: none.
    pub spend_cap_hourly_usd: Option<f64>,
    /// The spend has reached the cap: none of the mall's jobs is claimed ([`spend_capped`]).
    pub spend_capped: bool,
}

impl MallQueueOps {
    /// `layout_failures_15m / finished_15m`; 0 without finished attempts.
    pub fn layout_share_15m(&self) -> f64 {
        if self.finished_15m <= 0 {
            0.0
        } else {
            self.layout_failures_15m as f64 / self.finished_15m as f64
        }
    }
}

/// The queue's figures of the ops snapshot (DESIGN §6).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct QueueOps {
    pub queued: i64,
    pub running: i64,
    pub done: i64,
    pub dead: i64,
    pub cancelled: i64,
    pub oldest_queued: Option<Duration>,
    pub dead_last_hour: i64,
    /// Running with an expired lease or past the hard deadline.
    pub stuck_running: i64,
    pub deadline_kills_last_hour: i64,
    /// What every attempt cost in the rolling hour, USD: the deployment's spend, which
    /// `spend_cap_hourly_usd` caps.
    pub cost_usd_last_hour: f64,
    /// The deployment-wide hourly spend cap of this replica (`LPS_SPEND_CAP_HOURLY_USD`).
    pub spend_cap_hourly_usd: Option<f64>,
    /// The deployment's spend has reached its cap: no job is claimed ([`spend_capped`]).
    pub spend_capped: bool,
    pub malls: Vec<MallQueueOps>,
}
