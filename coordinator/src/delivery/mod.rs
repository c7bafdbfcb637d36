//! Delivery through an outbox: searches tell operator-configured destinations (webhook
//! receivers, by name) when they are final (DESIGN §6 "Delivery").
//!
//! Owns the `delivery` table. Rows are inserted only by the database itself, in the
//! statement that makes a search (or product) final — the `job_delivery_events` trigger
//! (migration 0018) or the enqueue statement of a search answered from the caches — so an
//! event commits with the final status and is never lost. Every other change is one
//! guarded statement here (`sql/`), named after its precondition:
//!
//! - [`Outbox::claim`]: `FOR UPDATE SKIP LOCKED` inside the `UPDATE … RETURNING`, due rows
//!   in `next_attempt_at` order (index `delivery_due`); each claim is an attempt and its
//!   number fences the outcome, so any number of replicas deliver each attempt once;
//! - [`Outbox::delivered_if_claimed`], [`Outbox::failed_if_claimed`],
//!   [`Outbox::release_if_claimed`]: `WHERE state = 'delivering' AND claimed_by AND
//!   attempts`; zero rows is [`Recorded::ClaimLost`] (the claim expired and another worker
//!   has the row), never applied;
//! - [`Outbox::retry_if_dead`]: an operator's retry;
//! - [`enqueue_price_moves`]: an insert made by LPS code rather than the database: a
//!   schedule's price-move event, its body rendered, in the transaction of the evaluation
//!   that found it (`schedule`), with ON CONFLICT DO NOTHING on its unique key;
//! - [`enqueue_alert`]: the other one: an alert rule's announcement (fired or resolved)
//!   to the alert webhook, its message rendered, in the transaction of the evaluation that
//!   recorded the transition (`alerts`), so each transition is posted by the worker with
//!   the same retries, signature and dead state as any event ([`ALERT_DESTINATION`]).
//!
//! The worker that posts claimed rows is [`worker`]; its settings and the destinations are
//! [`config`]; the request's signature is [`signature`].
//!
//! Time: every statement takes an optional `now` (`None`: the database clock); tests pin it
//! with [`Outbox::at`].

pub mod config;
pub mod signature;
pub mod worker;

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use tracing::instrument;

pub use config::{DeliveryArgs, DeliveryConfig, Destination, Destinations};

use crate::{error::Error, search::Page};

/// A delivery's state (the `delivery_state` enum of migration 0018).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, sqlx::Type, serde::Serialize)]
#[sqlx(type_name = "delivery_state", rename_all = "lowercase")]
#[serde(rename_all = "lowercase")]
pub enum DeliveryState {
    Pending,
    Delivering,
    Delivered,
    Dead,
}

impl DeliveryState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Delivering => "delivering",
            Self::Delivered => "delivered",
            Self::Dead => "dead",
        }
    }
}

/// One event to one destination, as GetSearch and ListDeliveries show it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct DeliveryInfo {
    pub delivery_id: i64,
    pub event_id: uuid::Uuid,
    /// `None` for an alert's announcement.
    pub search_id: Option<i64>,
    /// `None`: the search is final; else the product (its index) that is.
    pub product_index: Option<u32>,
    pub search_version: i64,
    /// Set for a price-move event: the schedule whose run it is.
    pub schedule_id: Option<i64>,
    /// Set for an alert's announcement: the rule.
    pub alert_rule: Option<String>,
    pub destination: String,
    pub state: DeliveryState,
    pub attempts: u32,
    /// Pending: when the next attempt is due; delivering: when the claim expires.
    pub next_attempt_at: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
    pub delivered_at: Option<DateTime<Utc>>,
    pub last_status: Option<u16>,
    pub last_error: Option<String>,
}

/// A claimed delivery: what the worker needs to render, send and record it.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub delivery_id: i64,
    pub event_id: uuid::Uuid,
    /// `None` for an alert's announcement (its body is stored with it).
    pub search_id: Option<i64>,
    pub product_index: Option<u32>,
    pub search_version: i64,
    pub destination: String,
    /// This claim's attempt number (1 for the first): the fencing token of its outcome.
    pub attempt: u32,
    /// When the event was stored (the search or product became final).
    pub created_at: DateTime<Utc>,
    /// The payload an earlier attempt sent, to send unchanged; `None` before the first.
    pub body: Option<String>,
    /// Set for an alert's announcement: the rule (it goes to the alert webhook).
    pub alert_rule: Option<String>,
}

/// What recording an attempt's outcome did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorded {
    Delivered,
    /// Pending again, due at this time.
    Retry(DateTime<Utc>),
    /// That was the last attempt allowed.
    Dead,
    /// The claim had expired and another worker holds the row: nothing was changed.
    ClaimLost,
}

/// The outbox's figures of the ops snapshot.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct DeliveryOps {
    /// Waiting for an attempt or in one.
    pub pending: i64,
    pub dead: i64,
    pub delivered_last_hour: i64,
    /// How long the oldest waiting event has waited.
    pub oldest_pending: Option<Duration>,
}

/// Which deliveries a list shows.
#[derive(Debug, Clone, Default)]
pub struct DeliveryFilter {
    pub dead_only: bool,
    pub search_id: Option<i64>,
}

/// Most deliveries GetSearch shows for one search (8 destinations × its events).
pub const SEARCH_DELIVERIES_LIMIT: i64 = 1000;

/// The delivery outbox. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Outbox {
    pool: PgPool,
    now: Option<DateTime<Utc>>,
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

fn count(n: i32) -> u32 {
    u32::try_from(n).unwrap_or_default()
}

impl Outbox {
    pub fn new(pool: PgPool) -> Self {
        Self { pool, now: None }
    }

    /// The same outbox with its clock pinned to `now`.
    #[must_use]
    pub fn at(&self, now: DateTime<Utc>) -> Self {
        Self {
            pool: self.pool.clone(),
            now: Some(now),
        }
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Claims at most `n` due deliveries to `destinations` for `worker`, each for
    /// `claim_for`.
    #[instrument(name = "delivery.claim", skip_all, fields(count = tracing::field::Empty), err)]
    pub async fn claim(
        &self,
        worker: &str,
        destinations: &[String],
        n: u32,
        claim_for: Duration,
    ) -> Result<Vec<Claimed>, Error> {
        let rows = sqlx::query_file!(
            "src/delivery/sql/claim.sql",
            worker,
            i64::from(n),
            millis(claim_for),
            self.now,
            destinations
        )
        .fetch_all(&self.pool)
        .await?;
        tracing::Span::current().record("count", rows.len() as i64);
        Ok(rows
            .into_iter()
            .map(|r| Claimed {
                delivery_id: r.delivery_id,
                event_id: r.event_id,
                search_id: r.search_id,
                product_index: r.product_index.and_then(|i| u32::try_from(i).ok()),
                search_version: r.search_version,
                destination: r.destination,
                attempt: count(r.attempts),
                created_at: r.created_at,
                body: r.body,
                alert_rule: r.alert_rule,
            })
            .collect())
    }

    /// The receiver answered `status` (2xx) to `body`: delivered, if `claim` is current.
    pub async fn delivered_if_claimed(
        &self,
        worker: &str,
        claim: &Claimed,
        status: u16,
        body: &str,
    ) -> Result<Recorded, Error> {
        let row = sqlx::query_file!(
            "src/delivery/sql/delivered.sql",
            claim.delivery_id,
            worker,
            i32::try_from(claim.attempt).unwrap_or(i32::MAX),
            i32::from(status),
            body,
            self.now
        )
        .fetch_optional(&self.pool)
        .await?;
        Ok(match row {
            Some(_) => Recorded::Delivered,
            None => Recorded::ClaimLost,
        })
    }

    /// The attempt failed (`status`: the receiver's answer, `None` without one): pending
    /// again after `backoff`, or dead when it was attempt `max_attempts`; if `claim` is
    /// current. `body`: what was sent, kept for the next attempts.
    #[allow(clippy::too_many_arguments)]
    pub async fn failed_if_claimed(
        &self,
        worker: &str,
        claim: &Claimed,
        status: Option<u16>,
        error: &str,
        max_attempts: u32,
        backoff: Duration,
        body: Option<&str>,
    ) -> Result<Recorded, Error> {
        let row = sqlx::query_file!(
            "src/delivery/sql/failed.sql",
            claim.delivery_id,
            worker,
            i32::try_from(claim.attempt).unwrap_or(i32::MAX),
            status.map(i32::from),
            error,
            i32::try_from(max_attempts).unwrap_or(i32::MAX),
            millis(backoff),
            body,
            self.now
        )
        .fetch_optional(&self.pool)
        .await?;
        Ok(match row {
            None => Recorded::ClaimLost,
            Some(r) if r.state == DeliveryState::Dead => Recorded::Dead,
            Some(r) => Recorded::Retry(r.next_attempt_at),
        })
    }

    /// Gives `claim` back without counting its attempt, due again after `delay` (the
    /// payload could not be read: the database failed, not the receiver).
    pub async fn release_if_claimed(
        &self,
        worker: &str,
        claim: &Claimed,
        delay: Duration,
    ) -> Result<Recorded, Error> {
        let row = sqlx::query_file!(
            "src/delivery/sql/release.sql",
            claim.delivery_id,
            worker,
            i32::try_from(claim.attempt).unwrap_or(i32::MAX),
            millis(delay),
            self.now
        )
        .fetch_optional(&self.pool)
        .await?;
        Ok(match row {
            Some(_) => Recorded::Retry(self.now.unwrap_or_else(Utc::now)),
            None => Recorded::ClaimLost,
        })
    }

    /// An operator's retry: dead delivery `id` pending again, due now, with fresh attempts.
    /// [`Error::NotFound`] for an unknown id, [`Error::Precondition`] when it is not dead.
    #[instrument(name = "delivery.retry", skip_all, fields(delivery.id = id), err(level = "info"))]
    pub async fn retry_if_dead(&self, id: i64) -> Result<DeliveryInfo, Error> {
        let retried = sqlx::query_file!("src/delivery/sql/retry.sql", id, self.now)
            .fetch_optional(&self.pool)
            .await?
            .is_some();
        let info = self.get(id).await?;
        if !retried {
            return Err(Error::Precondition(format!(
                "delivery {id} is {}, not dead; only a dead delivery is retried",
                info.state.as_str()
            )));
        }
        Ok(info)
    }

    /// One delivery; [`Error::NotFound`] for an unknown id.
    pub async fn get(&self, id: i64) -> Result<DeliveryInfo, Error> {
        let rows = self
            .page(&DeliveryFilter::default(), Some(id + 1), 1)
            .await?;
        rows.into_iter()
            .find(|d| d.delivery_id == id)
            .ok_or(Error::NotFound("delivery", id))
    }

    async fn page(
        &self,
        filter: &DeliveryFilter,
        before: Option<i64>,
        limit: i64,
    ) -> Result<Vec<DeliveryInfo>, Error> {
        let rows = sqlx::query_file!(
            "src/delivery/sql/list.sql",
            filter.dead_only,
            filter.search_id,
            before,
            limit
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|r| DeliveryInfo {
                delivery_id: r.delivery_id,
                event_id: r.event_id,
                search_id: r.search_id,
                product_index: r.product_index.and_then(|i| u32::try_from(i).ok()),
                search_version: r.search_version,
                schedule_id: r.schedule_id,
                alert_rule: r.alert_rule,
                destination: r.destination,
                state: r.state,
                attempts: count(r.attempts),
                next_attempt_at: r.next_attempt_at,
                created_at: r.created_at,
                delivered_at: r.delivered_at,
                last_status: r.last_status.and_then(|s| u16::try_from(s).ok()),
                last_error: r.last_error,
            })
            .collect())
    }

    /// One page of deliveries, newest first, before delivery `before` when given.
    #[instrument(name = "delivery.list", skip_all, err(level = "info"))]
    pub async fn list(
        &self,
        filter: &DeliveryFilter,
        before: Option<i64>,
        limit: u32,
    ) -> Result<Page<DeliveryInfo>, Error> {
        let rows = self.page(filter, before, i64::from(limit) + 1).await?;
        Ok(Page::of(rows, limit, |d| d))
    }

    /// A search's deliveries, oldest first (at most [`SEARCH_DELIVERIES_LIMIT`]).
    pub async fn for_search(&self, search_id: i64) -> Result<Vec<DeliveryInfo>, Error> {
        let filter = DeliveryFilter {
            dead_only: false,
            search_id: Some(search_id),
        };
        let mut rows = self.page(&filter, None, SEARCH_DELIVERIES_LIMIT).await?;
        rows.reverse();
        Ok(rows)
    }

    /// The outbox's figures now.
    pub async fn ops(&self) -> Result<DeliveryOps, Error> {
        let r = sqlx::query_file!("src/delivery/sql/ops.sql", self.now)
            .fetch_one(&self.pool)
            .await?;
        Ok(DeliveryOps {
            pending: r.pending,
            dead: r.dead,
            delivered_last_hour: r.delivered_last_hour,
            oldest_pending: r
                .oldest_pending
                .map(|t| (r.now - t).to_std().unwrap_or_default()),
        })
    }
}

/// One price-move event to one destination, rendered.
#[derive(Debug, Clone)]
pub struct PriceMoveEvent {
    pub event_id: uuid::Uuid,
    pub destination: String,
    /// The `DeliveryEvent` in the proto3 JSON mapping, sent as it is by every attempt.
    pub body: String,
}

/// Where a price-move event comes from: run `run` of schedule `schedule_id`, product
/// `product_index` of its search `search_id` at version `search_version`.
#[derive(Debug, Clone, Copy)]
pub struct PriceMoveSource {
    pub schedule_id: i64,
    pub run: i32,
    pub search_id: i64,
    pub product_index: i32,
    pub search_version: i64,
}

/// Stores `events` (one per destination) of `source` in the caller's transaction; an event
/// already stored for the same schedule, run, product and destination is left as it is.
/// Returns how many were stored. `now`: `None` for the database clock.
pub async fn enqueue_price_moves(
    conn: &mut sqlx::PgConnection,
    source: PriceMoveSource,
    events: &[PriceMoveEvent],
    now: Option<DateTime<Utc>>,
) -> Result<u64, Error> {
    let ids: Vec<uuid::Uuid> = events.iter().map(|e| e.event_id).collect();
    let destinations: Vec<String> = events.iter().map(|e| e.destination.clone()).collect();
    let bodies: Vec<String> = events.iter().map(|e| e.body.clone()).collect();
    let row = sqlx::query_file!(
        "src/delivery/sql/price_move.sql",
        source.schedule_id,
        source.run,
        source.search_id,
        source.product_index,
        source.search_version,
        &ids,
        &destinations,
        &bodies,
        now
    )
    .fetch_one(conn)
    .await?;
    Ok(u64::try_from(row.inserted).unwrap_or_default())
}

/// The `destination` of an alert's announcement: the alert webhook
/// (`LPS_ALERT_WEBHOOK_URL`), which the worker posts to by the row's kind, not by this name.
pub const ALERT_DESTINATION: &str = "alert-webhook";

/// Stores alert rule `rule`'s announcement `body` (the webhook's JSON message) in the
/// caller's transaction, due at once; returns its delivery id. `now`: `None` for the
/// database clock.
pub async fn enqueue_alert(
    conn: &mut sqlx::PgConnection,
    rule: &str,
    body: &str,
    now: Option<DateTime<Utc>>,
) -> Result<i64, Error> {
    let row = sqlx::query_file!(
        "src/delivery/sql/alert.sql",
        rule,
        ALERT_DESTINATION,
        body,
        now
    )
    .fetch_one(conn)
    .await?;
    Ok(row.delivery_id)
}

/// The delay before attempt `attempt + 1` after attempt `attempt` failed:
/// `min(cap, base · 2^(attempt-1))`, jittered to 50–100 % so receivers that failed together
/// are not retried together.
pub fn backoff(attempt: u32, base: Duration, cap: Duration) -> Duration {
    let exp = attempt.saturating_sub(1).min(30);
    let full = base.saturating_mul(1 << exp).min(cap);
    full.mul_f64(0.5 + fastrand::f64() * 0.5)
}

/// A delivery on the wire.
impl From<&DeliveryInfo> for lps_proto::pb::Delivery {
    fn from(d: &DeliveryInfo) -> Self {
        use lps_proto::{model::timestamp_to_pb, pb};
        Self {
            delivery_id: d.delivery_id,
            event_id: d.event_id.to_string(),
            destination: d.destination.clone(),
            kind: match (&d.alert_rule, d.schedule_id, d.product_index) {
                (Some(_), _, _) => pb::DeliveryEventKind::Alert,
                (None, Some(_), _) => pb::DeliveryEventKind::PriceMove,
                (None, None, Some(_)) => pb::DeliveryEventKind::ProductFinal,
                (None, None, None) => pb::DeliveryEventKind::SearchFinal,
            } as i32,
            product_index: d.product_index,
            state: match d.state {
                DeliveryState::Pending => pb::DeliveryState::Pending,
                DeliveryState::Delivering => pb::DeliveryState::Delivering,
                DeliveryState::Delivered => pb::DeliveryState::Delivered,
                DeliveryState::Dead => pb::DeliveryState::Dead,
            } as i32,
            attempts: d.attempts,
            last_error: d.last_error.clone().unwrap_or_default(),
            last_status: d.last_status.map_or(0, u32::from),
            next_attempt_at: Some(timestamp_to_pb(d.next_attempt_at)),
            created_at: Some(timestamp_to_pb(d.created_at)),
            delivered_at: d.delivered_at.map(timestamp_to_pb),
            search_id: d.search_id.unwrap_or_default(),
            search_version: d.search_version,
            schedule_id: d.schedule_id.unwrap_or_default(),
            alert_rule: d.alert_rule.clone().unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_the_cap_with_jitter() {
        let base = Duration::from_secs(10);
        let cap = Duration::from_secs(3600);
        for _ in 0..100 {
            let first = backoff(1, base, cap);
            assert!(
                first >= Duration::from_secs(5) && first <= base,
                "{first:?}"
            );
            let fourth = backoff(4, base, cap);
            assert!(fourth >= Duration::from_secs(40) && fourth <= Duration::from_secs(80));
            let late = backoff(40, base, cap);
            assert!(late >= cap / 2 && late <= cap, "{late:?}");
        }
    }
}
