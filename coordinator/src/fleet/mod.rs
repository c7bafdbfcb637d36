//! The fleet: connected crawler nodes (read through [`node_session`]) and proxy ports
//! (the ledger's tables), and their figures in the ops snapshot (DESIGN §6). Read-only:
//! single statements, one snapshot each; errors are [`crate::error::Error`] so one mapping
//! (`grpc::status`) serves every service.
//!
//! Time: every time-dependent statement takes an optional `now` (`None`: the database
//! clock); tests pin it with [`Fleet::at`].

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use tracing::instrument;

use crate::{error::Error, node_session};
pub use crate::{ledger::PortState, node_session::NodeInfo};

/// Views of the nodes and proxy ports. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Fleet {
    pool: PgPool,
    now: Option<DateTime<Utc>>,
}

impl Fleet {
    pub fn new(pool: PgPool) -> Self {
        Self { pool, now: None }
    }

    /// The same views with their clock pinned to `now`.
    #[must_use]
    pub fn at(&self, now: DateTime<Utc>) -> Self {
        Self {
            pool: self.pool.clone(),
            now: Some(now),
        }
    }

    /// Connected nodes with the jobs they run.
    #[instrument(name = "fleet.nodes", skip_all, err(level = "info"))]
    pub async fn nodes(&self) -> Result<Vec<NodeInfo>, Error> {
        Ok(node_session::connected(&self.pool).await?)
    }

    /// Enabled proxy ports with their state now.
    #[instrument(name = "fleet.proxy_ports", skip_all, err(level = "info"))]
    pub async fn proxy_ports(&self) -> Result<Vec<ProxyPortInfo>, Error> {
        let rows = sqlx::query_file!("src/fleet/sql/proxy_ports.sql", self.now)
            .fetch_all(&self.pool)
            .await?;
        rows.into_iter()
            .map(|r| {
                Ok(ProxyPortInfo {
                    state: r
                        .state
                        .parse::<PortState>()
                        .map_err(|e| Error::Internal(e.to_string()))?,
                    host: r.host,
                    port: u16::try_from(r.port).unwrap_or_default(),
                    holder_node: r.holder_node,
                    leased_until: r.leased_until,
                    rest_until: r.rest_until,
                    cooldown_until: r.cooldown_until,
                    cooling_malls: r.cooling_malls,
                    last_used_at: r.last_used_at,
                    use_count: r.use_count,
                    burn_count: i64::from(r.burn_count),
                    last_reason: r.last_reason,
                })
            })
            .collect()
    }

    /// The nodes' and proxies' figures of the ops snapshot.
    #[instrument(name = "fleet.figures", skip_all, err(level = "info"))]
    pub async fn figures(&self) -> Result<FleetOps, Error> {
        let nodes = node_session::fleet(&self.pool, self.now).await?;
        let r = sqlx::query_file!("src/fleet/sql/fleet_ops.sql", self.now)
            .fetch_one(&self.pool)
            .await?;
        let malls = sqlx::query_file!("src/fleet/sql/mall_fleet_ops.sql", self.now)
            .fetch_all(&self.pool)
            .await?
            .into_iter()
            .map(|m| MallFleetOps {
                mall: m.mall,
                enabled: m.enabled,
                blocks_last_hour: m.blocks_last_hour,
                ports_cooling: m.ports_cooling,
                ports_available: m.ports_available,
            })
            .collect();
        Ok(FleetOps {
            nodes_connected: nodes.nodes_connected,
            nodes_quarantined: nodes.nodes_quarantined,
            free_slots: nodes.free_slots,
            ports_total: r.ports_total,
            ports_available: r.ports_available,
            blocks_last_hour: r.blocks_last_hour,
            block_ended_sessions_6h: r.block_ended_sessions_6h,
            malls,
        })
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
    /// Nodes quarantined now (they kept dropping their jobs), connected or not.
    pub nodes_quarantined: i64,
    /// Free slots of connected nodes that are not draining or quarantined.
    pub free_slots: i64,
    pub ports_total: i64,
    /// Ports usable by some mall now: not leased, resting or cooling for every mall. A
    /// per-mall cooldown does not show here; see [`FleetOps::lowest_mall`].
    pub ports_available: i64,
    pub blocks_last_hour: i64,
    pub block_ended_sessions_6h: i64,
    pub malls: Vec<MallFleetOps>,
}

impl FleetOps {
    /// Available ports in percent of all; 100 when there are none (nothing is exhausted).
    pub fn ports_available_pct(&self) -> f64 {
        self.pct(self.ports_available)
    }

    /// The enabled mall with the fewest ports available for it (the first by id on a tie),
    /// `None` without enabled malls. This is the capacity a crawl can count on: with every
    /// exit IP cooling for one mall after blocks, that mall gets no port although the
    /// deployment-wide [`FleetOps::ports_available`] says all are free.
    pub fn lowest_mall(&self) -> Option<&MallFleetOps> {
        self.malls
            .iter()
            .filter(|m| m.enabled)
            .min_by_key(|m| m.ports_available)
    }

    /// [`FleetOps::lowest_mall`]'s available ports (the deployment-wide figure without
    /// enabled malls).
    pub fn ports_available_min(&self) -> i64 {
        self.lowest_mall()
            .map_or(self.ports_available, |m| m.ports_available)
    }

    /// [`FleetOps::ports_available_min`] in percent of all ports; 100 without ports.
    pub fn ports_available_min_pct(&self) -> f64 {
        self.pct(self.ports_available_min())
    }

    /// `n` ports in percent of all; 100 when there are none.
    pub fn pct(&self, n: i64) -> f64 {
        if self.ports_total <= 0 {
            100.0
        } else {
            n as f64 * 100.0 / self.ports_total as f64
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct MallFleetOps {
    pub mall: String,
    /// Enabled in `LPS_MALLS` (only enabled malls count for the lowest availability).
    pub enabled: bool,
    pub blocks_last_hour: i64,
    /// Enabled ports cooling for this mall (for every mall, or for this one after a block).
    pub ports_cooling: i64,
    /// Enabled ports the ledger would lease for this mall now (not leased, resting or
    /// cooling for every mall or for this mall).
    pub ports_available: i64,
}
