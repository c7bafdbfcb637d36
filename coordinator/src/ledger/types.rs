//! Values the ledger hands out: grants, release outcomes, port listings and ops figures.

use std::{fmt, str::FromStr};

use chrono::{DateTime, Utc};
use lps_proto::model::{FieldError, SessionEndReason};

use super::config::Secret;

/// The answer to an acquire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acquired {
    Grant(Grant),
    /// Every port is leased, resting or cooling down for this mall.
    NoneFree {
        /// When the first port becomes usable for this mall if no lease is renewed; `None`
        /// when the gateway has no enabled ports at all.
        next_free_at: Option<DateTime<Utc>>,
    },
}

impl Acquired {
    pub fn grant(self) -> Option<Grant> {
        match self {
            Self::Grant(g) => Some(g),
            Self::NoneFree { .. } => None,
        }
    }
}

/// A leased proxy port and how to use it. `Debug` shows the password as `***`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub host: String,
    pub port: u16,
    pub username: String,
    pub password: Secret,
    /// The lease ends then unless the node's heartbeats renew it.
    pub lease_until: DateTime<Utc>,
    /// Searches allowed on this IP before the node rotates (the mall's budget).
    pub request_budget: u32,
    /// The lease's fencing token (the port's grant count): a release must name it.
    pub lease_id: i64,
}

/// A lease a heartbeat extended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RenewedPort {
    pub port: u16,
    pub lease_until: DateTime<Utc>,
}

/// What a release did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Released {
    /// The node held the port (for that job), so the port was released and its rest or
    /// cooldown applied. `false`: the port was not touched; only the IP session was recorded.
    pub held: bool,
    /// The job's IP burns after this release (`None`: no job, or no such job).
    pub job_ip_burns: Option<u32>,
    /// The job has burned more IPs than allowed: the caller fails it as `page_blocked`.
    pub over_burn_cap: bool,
    /// When the port's rest (after `budget`) ends.
    pub rest_until: Option<DateTime<Utc>>,
    /// When the port's cooldown for every mall (after `proxy_error`) ends.
    pub cooldown_until: Option<DateTime<Utc>>,
    /// When the port's cooldown for the IP session's mall (after `block`) ends.
    pub mall_cooldown_until: Option<DateTime<Utc>>,
}

/// A port taken back from a vanished node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleasedPort {
    pub port: u16,
    pub job_id: Option<i64>,
    pub mall: Option<String>,
}

/// What a reconcile changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reconciled {
    /// Ports seen for the first time.
    pub added: u64,
    /// Configured ports that were disabled and are enabled again.
    pub enabled: u64,
    /// Ports no longer configured: disabled, kept for their history.
    pub disabled: u64,
}

/// Where a port stands now. Precedence when several apply: disabled, leased, cooling
/// (every mall), resting, available.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PortState {
    Available,
    Leased,
    Resting,
    Cooling,
    Disabled,
}

impl PortState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Available => "available",
            Self::Leased => "leased",
            Self::Resting => "resting",
            Self::Cooling => "cooling",
            Self::Disabled => "disabled",
        }
    }
}

impl fmt::Display for PortState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for PortState {
    type Err = FieldError;

    fn from_str(s: &str) -> Result<Self, FieldError> {
        Ok(match s {
            "available" => Self::Available,
            "leased" => Self::Leased,
            "resting" => Self::Resting,
            "cooling" => Self::Cooling,
            "disabled" => Self::Disabled,
            other => {
                return Err(FieldError::new(
                    "state",
                    format!("unknown port state {other:?}"),
                ));
            }
        })
    }
}

/// Who holds a port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortHolder {
    pub node: String,
    pub job_id: Option<i64>,
    pub mall: Option<String>,
    pub leased_at: Option<DateTime<Utc>>,
    /// May be in the past: an expired lease that nobody took yet (the port is free).
    pub leased_until: DateTime<Utc>,
}

/// One port of the ledger, for listings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortRow {
    pub host: String,
    pub port: u16,
    pub enabled: bool,
    pub state: PortState,
    pub holder: Option<PortHolder>,
    pub rest_until: Option<DateTime<Utc>>,
    pub cooldown_until: Option<DateTime<Utc>>,
    /// Live per-mall cooldowns: (mall, until), by mall.
    pub mall_cooldowns: Vec<(String, DateTime<Utc>)>,
    pub last_used_at: Option<DateTime<Utc>>,
    pub use_count: i64,
    pub burn_count: i32,
    pub last_reason: Option<SessionEndReason>,
}

/// Enabled ports cooling down for one mall.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MallCooling {
    pub mall: String,
    pub ports: i64,
}

/// The ledger's figures of the ops snapshot. `available + leased + resting + cooling ==
/// total` (enabled ports only).
#[derive(Debug, Clone, PartialEq)]
pub struct LedgerOps {
    pub total: i64,
    pub available: i64,
    pub leased: i64,
    pub resting: i64,
    /// Cooling down for every mall.
    pub cooling: i64,
    /// Cooling down for one mall (such a port may be available for the others).
    pub cooling_per_mall: Vec<MallCooling>,
    /// `100 * available / total`; 100 when there are no ports (nothing is starved of
    /// ports that do not exist, and an alert on "below N %" should not fire for it).
    pub available_pct: f64,
    /// IP sessions that ended in a block in the last 6 hours.
    pub block_sessions_6h: i64,
    /// Bot blocks detected in the last hour.
    pub bot_detections_1h: i64,
}
