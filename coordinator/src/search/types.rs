//! Values the read side hands out: a search's status, a job, price history, nodes, proxy
//! ports and the ops snapshot. Plain Rust types; the gRPC adapters translate them.

use std::fmt;

use chrono::{DateTime, Utc};
use lps_proto::model::{ErrorClass, JobState, MallId, Offer, Outcome, RoundReport};
use serde::Deserialize;
use uuid::Uuid;

use crate::queue::{Cancelled, Disposition, QueueOps};

/// Where a search stands: per product, per mall.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchStatus {
    pub search_id: i64,
    /// The newest change number over the search's jobs; only grows.
    pub version: i64,
    pub created_at: DateTime<Utc>,
    /// Set once CancelSearch was called for this search.
    pub cancelled_at: Option<DateTime<Utc>>,
    /// In request order.
    pub products: Vec<ProductStatus>,
}

impl SearchStatus {
    /// Every item is done, dead or cancelled.
    pub fn is_final(&self) -> bool {
        self.products.iter().all(ProductStatus::is_final)
    }

    pub fn is_cancelled(&self) -> bool {
        self.cancelled_at.is_some()
    }
}

/// One product of a search.
#[derive(Debug, Clone, PartialEq)]
pub struct ProductStatus {
    /// Index into the request's products.
    pub index: usize,
    pub code: Option<String>,
    /// NB: taken from the job that answers the product. For an item answered from the store
    /// that is the earlier request's spelling of the same product (same identity).
    pub name: String,
    /// In request order of the malls.
    pub malls: Vec<MallStatus>,
}

impl ProductStatus {
    /// The cheapest offer over the product's malls by effective price (ties: lower shipping,
    /// then the earlier mall).
    pub fn lowest(&self) -> Option<&Offer> {
        self.malls
            .iter()
            .flat_map(|m| m.offers.first())
            .min_by_key(|o| (o.effective_price(), o.shipping_fee))
    }

    /// Every mall of the product is in a final state.
    pub fn is_final(&self) -> bool {
        self.malls.iter().all(|m| m.state.is_final())
    }
}

/// One (product, mall) item of a search and the job that answers it.
#[derive(Debug, Clone, PartialEq)]
pub struct MallStatus {
    pub mall: MallId,
    pub job_id: i64,
    pub disposition: Disposition,
    pub state: JobState,
    /// Set when `state` is done.
    pub outcome: Option<Outcome>,
    /// Cheapest (effective price) first; at most [`super::STATUS_OFFERS_PER_ITEM`].
    pub offers: Vec<Offer>,
    /// Set when `state` is dead.
    pub error_class: Option<ErrorClass>,
    pub error: Option<String>,
    pub attempts: u32,
}

/// One job, for GetJob.
#[derive(Debug, Clone, PartialEq)]
pub struct JobInfo {
    pub job_id: i64,
    pub product_code: Option<String>,
    pub product_name: String,
    pub mall: MallId,
    pub state: JobState,
    pub priority: u8,
    pub attempts: u32,
    pub max_attempts: u32,
    pub reclaims: u32,
    pub lease_epoch: i64,
    pub node_id: Option<String>,
    pub created_at: DateTime<Utc>,
    pub run_after: DateTime<Utc>,
    pub run_started_at: Option<DateTime<Utc>>,
    pub deadline_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    pub outcome: Option<Outcome>,
    /// Cheapest (effective price) first.
    pub offers: Vec<Offer>,
    pub error_class: Option<ErrorClass>,
    pub last_error: Option<String>,
    pub rounds: Vec<RoundReport>,
    pub bytes: u64,
    pub cost_usd: f64,
}

/// An offer as stored in `offer`, read back through JSON (see `status.sql`).
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct OfferRow {
    pub title: String,
    pub price: i64,
    pub shipping_fee: i64,
    #[serde(default)]
    pub url: String,
    #[serde(default)]
    pub seller: String,
    #[serde(default)]
    pub match_score: f32,
}

impl OfferRow {
    pub(crate) fn into_offer(self, mall: &MallId) -> Offer {
        Offer {
            mall: mall.clone(),
            title: self.title,
            price: self.price,
            shipping_fee: self.shipping_fee,
            url: self.url,
            seller: self.seller,
            match_score: self.match_score,
        }
    }
}

/// One recorded answer of a product: the lowest over its malls at that time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PriceHistoryEntry {
    pub at: DateTime<Utc>,
    pub lowest_effective_price: i64,
    pub lowest_mall: String,
    /// The lowest offer per mall at that time.
    pub malls: Vec<MallPrice>,
}

/// An element of `price_history.malls`. Every field defaults, so an entry written by an
/// older or newer coordinator still reads.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct MallPrice {
    pub mall: String,
    pub price: i64,
    pub shipping_fee: i64,
    pub effective_price: i64,
    pub url: String,
    pub title: String,
}

/// What CancelSearch did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CancelReport {
    /// Queued jobs cancelled in place.
    pub cancelled_queued: u32,
    /// Running jobs cancelled; their nodes are told to stop.
    pub cancelling_running: u32,
    /// Active jobs left alone because another active search shares them.
    pub kept_shared: u32,
    /// Every job this call cancelled.
    pub cancelled: Vec<Cancelled>,
}

/// Which dead jobs RetryDead puts back. Every given filter must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RetryDeadFilter {
    /// Only these jobs; empty: any.
    pub job_ids: Vec<i64>,
    pub mall: Option<MallId>,
    /// Only jobs that died at or after this time.
    pub since: Option<DateTime<Utc>>,
}

/// A connected crawler node (a row of `node_session`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeInfo {
    pub node_id: String,
    pub session_id: Uuid,
    /// The coordinator replica holding the node's stream.
    pub coordinator_id: String,
    pub version: String,
    pub slots: u32,
    pub free_slots: u32,
    /// Empty: every mall.
    pub malls: Vec<String>,
    pub running_jobs: Vec<i64>,
    pub connected_at: DateTime<Utc>,
    pub last_seen_at: DateTime<Utc>,
    pub draining: bool,
}

/// Where a proxy port stands, from its three `*_until` times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortState {
    /// A node holds it.
    Leased,
    /// Blocked: cooling down for every mall.
    Cooling,
    /// Its per-IP request budget was used up; resting.
    Resting,
    /// Can be granted (unless it cools for the asking mall; see `cooling_malls`).
    Available,
}

impl PortState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Leased => "leased",
            Self::Cooling => "cooling",
            Self::Resting => "resting",
            Self::Available => "available",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "leased" => Self::Leased,
            "cooling" => Self::Cooling,
            "resting" => Self::Resting,
            "available" => Self::Available,
            _ => return None,
        })
    }
}

impl fmt::Display for PortState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One proxy port of the ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyPortInfo {
    pub host: String,
    pub port: u16,
    pub state: PortState,
    pub holder_node: Option<String>,
    pub leased_until: Option<DateTime<Utc>>,
    pub rest_until: Option<DateTime<Utc>>,
    pub cooldown_until: Option<DateTime<Utc>>,
    /// Malls the port is cooling down for right now (per-mall cooldowns).
    pub cooling_malls: Vec<String>,
    pub last_used_at: Option<DateTime<Utc>>,
    pub use_count: i64,
    pub burn_count: i64,
    pub last_reason: Option<String>,
}

/// The nodes' and proxies' figures of the ops snapshot (DESIGN §6).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FleetOps {
    pub nodes_connected: i64,
    /// Free slots of connected nodes that are not draining.
    pub free_slots: i64,
    pub ports_total: i64,
    pub ports_available: i64,
    pub blocks_last_hour: i64,
    pub block_ended_sessions_6h: i64,
    pub malls: Vec<MallFleetOps>,
}

impl FleetOps {
    /// Available ports in percent of all; 100 when there are none (nothing is exhausted).
    pub fn ports_available_pct(&self) -> f64 {
        if self.ports_total <= 0 {
            100.0
        } else {
            self.ports_available as f64 * 100.0 / self.ports_total as f64
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct MallFleetOps {
    pub mall: String,
    pub blocks_last_hour: i64,
    pub ports_cooling: i64,
}

/// The whole ops snapshot: the queue's figures and the fleet's.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct OpsSnapshot {
    pub at: DateTime<Utc>,
    pub queue: QueueOps,
    pub fleet: FleetOps,
}
