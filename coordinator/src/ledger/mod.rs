//! The proxy-port ledger: every rule of DESIGN §4 "Proxy ledger", enforced in PostgreSQL.
//!
//! Owns the `proxy_port`, `proxy_port_cooldown`, `ip_session` and `bot_detection` tables;
//! a block's IP burn on the job is the queue's (`queue::embedded::burn_ip`), counted in the
//! release's transaction. `proxy_port` is the single truth about exit IPs shared by
//! every coordinator replica: nothing about ports is kept in memory, so a restart forgets
//! nothing and two replicas can never hand out one IP twice (the §8 lesson). Each
//! transition is ONE guarded SQL statement (in `sql/`; a block's release adds the queue's IP
//! burn in its transaction):
//!
//! - [`Ledger::acquire`]: a `FOR UPDATE SKIP LOCKED` pick of the least recently used port
//!   that is enabled, not leased (an expired lease is free), not resting, not cooling down
//!   for every mall nor for the asked mall, inside the `UPDATE … RETURNING` that leases it;
//! - [`Ledger::renew`]: the node's heartbeat extends its live leases; a missing port is lost;
//! - [`Ledger::release`]: guarded by the holder (node and job); by reason the port rests
//!   (`budget`), cools down for the mall with exponential backoff and full jitter and burns
//!   one of the job's IPs (`block`, counted by the queue in the same transaction), cools down for every mall (`proxy_error`) or is simply
//!   free; the IP session is recorded whether or not the node still held the port;
//! - [`Ledger::release_node`] / [`Ledger::release_lost_node`]: a vanished node's ports;
//! - [`Ledger::reconcile`]: the configured ports, under an advisory lock so replicas that
//!   start together take turns.
//!
//! Invariants: a port has at most one holder (`holder_node`) and a lease only with a holder
//! (CHECK constraints); an enabled port is in exactly one of available, leased, resting,
//! cooling at any instant (see [`PortState`]). No transaction is held across remote work,
//! so every call is cancellation-safe: an aborted call either committed or did nothing.
//!
//! Secrets: the gateway password lives only in [`LedgerConfig`] and [`Grant`] as a
//! [`Secret`]; it is never stored, logged, put in a span or in an error.
//!
//! Time: every statement takes an optional `now`; `None` means the database clock
//! (`clock_timestamp()`), so all replicas agree. Tests pin it with [`Ledger::at`], and the
//! block-cooldown jitter with [`Ledger::with_jitter`].

mod advice;
mod config;
mod error;
mod types;

use std::{sync::Arc, time::Duration};

use chrono::{DateTime, Utc};
use lps_proto::model::{BlockEvent, FieldError, MallId, SessionEndReason, SessionStats};
use sqlx::PgPool;
use tracing::instrument;

use crate::queue;

pub use advice::{Advice, AdviceParams, AdviceStep};
pub use config::{
    DEFAULT_IP_REQUEST_BUDGET, DEFAULT_MAX_IP_BURNS_PER_JOB, LedgerArgs, LedgerConfig,
    PORTS_SETTING, PortSet, Secret,
};
pub use error::Error;
pub use types::*;

/// A row of `release.sql`.
struct ReleaseRow {
    held: bool,
    ip_burns: Option<i16>,
    rest_until: Option<DateTime<Utc>>,
    cooldown_until: Option<DateTime<Utc>>,
    mall_cooldown_until: Option<DateTime<Utc>>,
}

/// Key of the advisory lock that serializes reconciles across replicas.
const RECONCILE_LOCK: i64 = 0x4c50_535f_5052_5859; // "LPS_PRXY"

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

fn port_u16(port: i32) -> Result<u16, Error> {
    u16::try_from(port).map_err(|_| Error::Internal(format!("stored port {port} out of range")))
}

fn to_i32(field: &str, v: u32) -> Result<i32, Error> {
    i32::try_from(v).map_err(|_| FieldError::new(field, "out of range").into())
}

/// The proxy-port ledger. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Ledger {
    pool: PgPool,
    config: Arc<LedgerConfig>,
    now: Option<DateTime<Utc>>,
    jitter: Option<f64>,
}

impl Ledger {
    pub fn new(pool: PgPool, config: LedgerConfig) -> Self {
        Self {
            pool,
            config: Arc::new(config),
            now: None,
            jitter: None,
        }
    }

    /// The same ledger with its clock pinned to `now` (tests and replays).
    #[must_use]
    pub fn at(&self, now: DateTime<Utc>) -> Self {
        Self {
            now: Some(now),
            ..self.clone()
        }
    }

    /// The same ledger with the block-cooldown jitter pinned to `fraction` of the ceiling
    /// (clamped to 0..=1) instead of drawn uniformly (tests).
    #[must_use]
    pub fn with_jitter(&self, fraction: f64) -> Self {
        Self {
            jitter: Some(fraction.clamp(0.0, 1.0)),
            ..self.clone()
        }
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    pub fn config(&self) -> &LedgerConfig {
        &self.config
    }

    /// Makes the enabled ports exactly the configured ones (run on start). Removed ports
    /// are disabled, not deleted: their history stays and a live lease on one runs out
    /// normally, but they are never granted again. Re-added ports are enabled again.
    /// Replicas starting together take turns under an advisory lock; with different
    /// configurations the last one to start wins.
    #[instrument(name = "ledger.reconcile", skip_all, fields(ports = self.config.ports.len() as i64), err)]
    pub async fn reconcile(&self) -> Result<Reconciled, Error> {
        let ports: Vec<i32> = self
            .config
            .ports
            .ports()
            .iter()
            .map(|p| i32::from(*p))
            .collect();
        let mut tx = self.pool.begin().await?;
        sqlx::query!("select pg_advisory_xact_lock($1)", RECONCILE_LOCK)
            .execute(&mut *tx)
            .await?;
        let r = sqlx::query_file!("src/ledger/sql/reconcile.sql", self.config.host, &ports)
            .fetch_one(&mut *tx)
            .await
            .map_err(|e| Error::from_db(e, "LPS_PROXY_GATEWAY_HOST"))?;
        tx.commit().await?;
        let n = |v: i64| u64::try_from(v).unwrap_or_default();
        Ok(Reconciled {
            added: n(r.added),
            enabled: n(r.enabled),
            disabled: n(r.disabled),
        })
    }

    /// Leases the least recently used free port to `node` for `mall` (and `job`, `None` for
    /// a warm-up). `NoneFree` says when the next port should free up.
    #[instrument(name = "ledger.acquire", skip_all, fields(node.id = %node, mall = %mall, job.id = job_id), err)]
    pub async fn acquire(
        &self,
        node: &str,
        mall: &MallId,
        job_id: Option<i64>,
    ) -> Result<Acquired, Error> {
        let r = sqlx::query_file!(
            "src/ledger/sql/acquire.sql",
            self.config.host,
            node,
            mall.as_str(),
            job_id,
            millis(self.config.lease_ttl),
            self.now,
        )
        .fetch_one(&self.pool)
        .await?;
        match (r.host, r.port, r.leased_until, r.lease_id) {
            (Some(host), Some(port), Some(lease_until), Some(lease_id)) => {
                Ok(Acquired::Grant(Grant {
                    host,
                    port: port_u16(port)?,
                    username: self.config.username.clone(),
                    password: self.config.password.clone(),
                    lease_until,
                    request_budget: self.config.budget_for(mall),
                    lease_id,
                }))
            }
            _ => Ok(Acquired::NoneFree {
                next_free_at: r.next_free_at,
            }),
        }
    }

    /// Extends `node`'s live leases on `ports` (its heartbeat). Returns the renewed ones; a
    /// port missing from the answer is no longer the node's and must not be used.
    #[instrument(name = "ledger.renew", skip_all, fields(node.id = %node, ports = ports.len() as i64), err)]
    pub async fn renew(&self, node: &str, ports: &[u16]) -> Result<Vec<RenewedPort>, Error> {
        self.extend(node, ports, false).await
    }

    /// [`Ledger::renew`] for the ports a reconnecting node lists: a lease that ran out
    /// while the node was away (its coordinator gone, the database down) is renewed too as
    /// long as nobody took the port since.
    #[instrument(name = "ledger.reattach", skip_all, fields(node.id = %node, ports = ports.len() as i64), err)]
    pub async fn reattach(&self, node: &str, ports: &[u16]) -> Result<Vec<RenewedPort>, Error> {
        self.extend(node, ports, true).await
    }

    async fn extend(
        &self,
        node: &str,
        ports: &[u16],
        expired_too: bool,
    ) -> Result<Vec<RenewedPort>, Error> {
        if ports.is_empty() {
            return Ok(Vec::new());
        }
        let ports: Vec<i32> = ports.iter().map(|p| i32::from(*p)).collect();
        let rows = sqlx::query_file!(
            "src/ledger/sql/renew.sql",
            self.config.host,
            node,
            &ports,
            millis(self.config.lease_ttl),
            self.now,
            expired_too,
        )
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter()
            .map(|r| {
                Ok(RenewedPort {
                    port: port_u16(r.port)?,
                    lease_until: r.leased_until,
                })
            })
            .collect()
    }

    /// Returns `port` (`node`'s lease `lease_id`, see [`Grant::lease_id`]; `None` from an
    /// older node: the lease of `session.job_id`) with `reason`, and records the IP session.
    /// A node that no longer holds that lease changes nothing on the port (`held: false`),
    /// but the IP session is still recorded. `over_burn_cap` says the job has now been
    /// blocked on more IPs than allowed: fail it as `page_blocked`.
    #[instrument(
        name = "ledger.release",
        skip_all,
        fields(node.id = %node, port = i64::from(port), lease.id = lease_id, reason = reason.as_str(), mall = %session.mall, job.id = session.job_id),
        err
    )]
    pub async fn release(
        &self,
        node: &str,
        port: u16,
        lease_id: Option<i64>,
        reason: SessionEndReason,
        session: &SessionStats,
    ) -> Result<Released, Error> {
        let jitter = self.jitter.unwrap_or_else(fastrand::f64);
        // A block that ends the lease burns one of the job's IPs: the queue counts it in
        // this transaction, so the port's cooldown and the job's count commit together.
        let burns_job = session.job_id.filter(|_| reason == SessionEndReason::Block);
        // NB: only such a release takes a transaction; any other is one statement.
        let mut tx = match burns_job {
            Some(_) => Some(self.pool.begin().await?),
            None => None,
        };
        macro_rules! release {
            ($db:expr) => {
                sqlx::query_file_as!(
                    ReleaseRow,
                    "src/ledger/sql/release.sql",
                    self.config.host,
                    i32::from(port),
                    node,
                    reason as SessionEndReason,
                    session.mall.as_str(),
                    session.job_id,
                    to_i32("requests", session.requests)?,
                    to_i32("ok", session.ok)?,
                    to_i32("blocked", session.blocked)?,
                    millis(session.elapsed),
                    millis(self.config.rest),
                    millis(self.config.block_cooldown_base) as f64,
                    millis(self.config.block_cooldown_cap) as f64,
                    jitter,
                    millis(self.config.proxy_error_cooldown),
                    self.now,
                    lease_id,
                    millis(self.config.burn_half_life) as f64,
                )
                .fetch_one($db)
                .await
                .map_err(|e| Error::from_db(e, "session"))?
            };
        }
        let r = match tx.as_mut() {
            Some(tx) => release!(&mut **tx),
            None => release!(&self.pool),
        };
        let ip_burns = match (tx, burns_job) {
            (Some(mut tx), Some(job_id)) => {
                let burns = if r.held {
                    queue::embedded::burn_ip(&mut tx, job_id).await?
                } else {
                    None
                };
                tx.commit().await?;
                burns.or(r.ip_burns)
            }
            _ => r.ip_burns,
        };
        let job_ip_burns = ip_burns.map(|b| u32::try_from(b).unwrap_or_default());
        Ok(Released {
            held: r.held,
            job_ip_burns,
            over_burn_cap: job_ip_burns.is_some_and(|b| b > self.config.max_ip_burns_per_job),
            rest_until: r.rest_until,
            cooldown_until: r.cooldown_until,
            mall_cooldown_until: r.mall_cooldown_until,
        })
    }

    /// Records the end of an IP session that was not a release (a `SessionEnd` report).
    #[instrument(
        name = "ledger.record_session",
        skip_all,
        fields(node.id = %node, port = i64::from(port), reason = reason.as_str(), mall = %session.mall, job.id = session.job_id),
        err
    )]
    pub async fn record_session(
        &self,
        node: &str,
        port: u16,
        session: &SessionStats,
        reason: SessionEndReason,
    ) -> Result<(), Error> {
        sqlx::query_file!(
            "src/ledger/sql/record_session.sql",
            self.config.host,
            i32::from(port),
            node,
            reason as SessionEndReason,
            session.mall.as_str(),
            session.job_id,
            to_i32("requests", session.requests)?,
            to_i32("ok", session.ok)?,
            to_i32("blocked", session.blocked)?,
            millis(session.elapsed),
            self.now,
        )
        .fetch_one(&self.pool)
        .await
        .map_err(|e| Error::from_db(e, "session"))?;
        Ok(())
    }

    /// Records a detected bot block (a `BlockEvent` report).
    #[instrument(name = "ledger.record_block", skip_all, fields(node.id = %node, mall = %block.mall, job.id = block.job_id, port = block.port.map(i64::from), ip_request_no = i64::from(block.ip_request_no)), err)]
    pub async fn record_block(&self, node: &str, block: &BlockEvent) -> Result<(), Error> {
        sqlx::query_file!(
            "src/ledger/sql/record_block.sql",
            node,
            block.mall.as_str(),
            block.query,
            to_i32("ip_request_no", block.ip_request_no)?,
            block.port.map(|_| self.config.host.as_str()),
            block.port.map(i32::from),
            block.marker,
            to_i32("html_len", block.html_len)?,
            block.headless,
            millis(block.elapsed),
            block.job_id,
            self.now,
        )
        .fetch_one(&self.pool)
        .await
        .map_err(|e| Error::from_db(e, "block"))?;
        Ok(())
    }

    /// Releases every port `node` holds (reason `shutdown`, no rest or cooldown): call it
    /// once the node vanished and its grace period is over.
    #[instrument(name = "ledger.release_node", skip_all, fields(node.id = %node), err)]
    pub async fn release_node(&self, node: &str) -> Result<Vec<ReleasedPort>, Error> {
        self.release_all(node, None).await
    }

    /// [`Ledger::release_node`] only while `stream` is still the node's latest stream and
    /// disconnected (a node that reconnected in the meantime keeps its ports).
    #[instrument(name = "ledger.release_lost_node", skip_all, fields(node.id = %node), err)]
    pub async fn release_lost_node(
        &self,
        node: &str,
        stream: uuid::Uuid,
    ) -> Result<Vec<ReleasedPort>, Error> {
        self.release_all(node, Some(stream)).await
    }

    async fn release_all(
        &self,
        node: &str,
        stream: Option<uuid::Uuid>,
    ) -> Result<Vec<ReleasedPort>, Error> {
        let rows = sqlx::query_file!("src/ledger/sql/release_node.sql", node, stream, self.now)
            .fetch_all(&self.pool)
            .await?;
        rows.into_iter()
            .map(|r| {
                Ok(ReleasedPort {
                    port: port_u16(r.port)?,
                    job_id: r.holder_job,
                    mall: r.holder_mall,
                })
            })
            .collect()
    }

    /// The ledger's figures of the ops snapshot.
    #[instrument(name = "ledger.ops", skip_all, err)]
    pub async fn ops(&self) -> Result<LedgerOps, Error> {
        let r = sqlx::query_file!("src/ledger/sql/ops.sql", self.now)
            .fetch_one(&self.pool)
            .await?;
        let cooling_per_mall = sqlx::query_file!("src/ledger/sql/mall_cooling.sql", self.now)
            .fetch_all(&self.pool)
            .await?
            .into_iter()
            .map(|m| MallCooling {
                mall: m.mall,
                ports: m.ports,
            })
            .collect();
        let available_pct = if r.total == 0 {
            100.0
        } else {
            100.0 * r.available as f64 / r.total as f64
        };
        Ok(LedgerOps {
            total: r.total,
            available: r.available,
            leased: r.leased,
            resting: r.resting,
            cooling: r.cooling,
            cooling_per_mall,
            available_pct,
            block_sessions_6h: r.block_sessions_6h,
            bot_detections_1h: r.bot_detections_1h,
        })
    }

    /// Every port the ledger knows, enabled or not, by host and port.
    #[instrument(name = "ledger.ports", skip_all, err)]
    pub async fn ports(&self) -> Result<Vec<PortRow>, Error> {
        let rows = sqlx::query_file!("src/ledger/sql/ports.sql", self.now)
            .fetch_all(&self.pool)
            .await?;
        rows.into_iter()
            .map(|r| {
                let holder = match (r.holder_node, r.leased_until) {
                    (Some(node), Some(leased_until)) => Some(PortHolder {
                        node,
                        job_id: r.holder_job,
                        mall: r.holder_mall,
                        leased_at: r.leased_at,
                        leased_until,
                    }),
                    _ => None,
                };
                Ok(PortRow {
                    host: r.host,
                    port: port_u16(r.port)?,
                    enabled: r.enabled,
                    state: r.state.parse()?,
                    holder,
                    rest_until: r.rest_until,
                    cooldown_until: r.cooldown_until,
                    mall_cooldowns: r.cooling_malls.into_iter().zip(r.cooling_until).collect(),
                    last_used_at: r.last_used_at,
                    use_count: r.use_count,
                    burn_count: r.burn_count,
                    last_reason: r.last_reason,
                })
            })
            .collect()
    }

    /// Suggests a per-IP request budget for `mall` from its recorded IP sessions, with
    /// [`AdviceParams::default`] (5 % block share, 30 IP sessions, 7 days).
    pub async fn advise(&self, mall: &MallId) -> Result<Advice, Error> {
        self.advise_with(mall, AdviceParams::default()).await
    }

    /// [`Ledger::advise`] with explicit parameters.
    #[instrument(name = "ledger.advise", skip_all, fields(mall = %mall), err)]
    pub async fn advise_with(&self, mall: &MallId, params: AdviceParams) -> Result<Advice, Error> {
        if !(params.threshold > 0.0 && params.threshold < 1.0) {
            return Err(FieldError::new("threshold", "must be between 0 and 1").into());
        }
        let rows = sqlx::query_file!(
            "src/ledger/sql/advise.sql",
            mall.as_str(),
            millis(params.lookback),
            self.now
        )
        .fetch_all(&self.pool)
        .await?;
        let histogram: Vec<(u32, u64, u64)> = rows
            .into_iter()
            .map(|r| {
                (
                    u32::try_from(r.requests).unwrap_or_default(),
                    u64::try_from(r.sessions).unwrap_or_default(),
                    u64::try_from(r.blocked).unwrap_or_default(),
                )
            })
            .collect();
        Ok(advice::advise(
            mall.clone(),
            params,
            self.config.budget_for(mall),
            &histogram,
        ))
    }
}
