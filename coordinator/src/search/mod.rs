//! The read side of searches and the operator's levers on them: what `SearchService` and
//! `OpsService` show and change besides enqueueing (which is [`Queue::enqueue`]). The
//! nodes and proxy ports are the `fleet` module's, the ops snapshot the `ops` module's.
//!
//! - [`Searches::status`]: a search per product and mall (disposition, job state, outcome,
//!   offers cheapest-first, error, attempts), the product's lowest offer (over offers whose
//!   shipping is known only) and the cheaper offer of unknown shipping beside it
//!   ([`ProductStatus::possibly_lower`]), `final`, and the `version` = max
//!   `job.change_seq` over its jobs (bumped by the `job_touch` trigger on every state
//!   change, so it only grows and a watcher can resume from it);
//! - [`Searches::job`], [`Searches::price_history`];
//! - [`Searches::cancel`]: cancels the search's active jobs that no other active search
//!   shares ([`Queue::cancel_search`]; see `queue/sql/cancel_*.sql` for why the sharing
//!   check is race-free against a concurrent Search joining the job), then tells the nodes
//!   running them;
//! - [`Searches::retry_dead`]: dead jobs back to the queue with fresh attempts
//!   ([`Queue::retry_dead`]);
//!
//! NB: the version only moves with the jobs. Cancelling a search whose active jobs are all
//! shared changes no job, so watchers see `cancelled` with the next job change.
//!
//! Nothing here writes a job: the levers call the queue's transitions. Reads are single
//! statements (one snapshot each). Errors
//! are [`crate::error::Error`], so one mapping (`error::status`) serves both.
//!
//! Time: like the queue, every time-dependent statement takes an optional `now` (`None`:
//! the database clock); tests pin it with [`Searches::at`].

mod types;

use std::time::Duration;

use chrono::{DateTime, Utc};
use lps_proto::model::{
    ErrorClass, FieldError, JobState, MallId, Outcome, ProductSpec, RoundReport,
};
use sqlx::types::Json;
use tracing::{instrument, warn};

pub use types::*;

use crate::{
    control,
    error::Error,
    queue::{Queue, SearchCancelled, stored_hints},
};

/// Most entries one price-history call returns.
pub const MAX_HISTORY_LIMIT: u32 = 1000;
/// Entries a price-history call returns when the caller gives no limit.
pub const DEFAULT_HISTORY_LIMIT: u32 = 100;
/// How far back price history goes when the caller gives no start.
pub const DEFAULT_HISTORY_WINDOW: Duration = Duration::from_secs(30 * 24 * 3600);
/// Offers per (product, mall) item a search status carries, cheapest first (GetJob shows
/// all of a job's offers). Bounds the status of a 200 × 20 search.
pub const STATUS_OFFERS_PER_ITEM: i64 = 20;

/// Read side of searches plus cancel and retry. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Searches {
    queue: Queue,
    now: Option<DateTime<Utc>>,
}

impl Searches {
    pub fn new(queue: Queue) -> Self {
        Self { queue, now: None }
    }

    /// The same view with its clock (and its queue's) pinned to `now`.
    #[must_use]
    pub fn at(&self, now: DateTime<Utc>) -> Self {
        Self {
            queue: self.queue.at(now),
            now: Some(now),
        }
    }

    pub fn queue(&self) -> &Queue {
        &self.queue
    }

    fn pool(&self) -> &sqlx::PgPool {
        self.queue.pool()
    }

    /// A search's status; [`Error::NotFound`] for an unknown id.
    #[instrument(name = "search.status", skip_all, fields(search.id = search_id), err(level = "info"))]
    pub async fn status(&self, search_id: i64) -> Result<SearchStatus, Error> {
        let rows = sqlx::query_file!(
            "src/search/sql/status.sql",
            search_id,
            STATUS_OFFERS_PER_ITEM
        )
        .fetch_all(self.pool())
        .await?;
        let Some(first) = rows.first() else {
            return Err(Error::NotFound("search", search_id));
        };
        let mut status = SearchStatus {
            search_id,
            version: 0,
            created_at: first.created_at,
            cancelled_at: first.cancelled_at,
            client: first.client.clone(),
            caller: first.caller.clone(),
            products: Vec::new(),
        };
        for r in rows {
            status.version = status.version.max(r.change_seq);
            let index = usize::try_from(r.product_index).unwrap_or_default();
            let mall = MallId::new(r.mall)?;
            let offers = r
                .offers
                .0
                .into_iter()
                .map(|o| o.into_offer(&mall))
                .collect();
            let item = MallStatus {
                job_id: r.job_id,
                disposition: r.disposition.parse()?,
                state: r.state,
                outcome: r.outcome.filter(|_| r.state == JobState::Done),
                offers,
                error_class: r.error_class.filter(|_| r.state == JobState::Dead),
                error: r.last_error.filter(|_| r.state == JobState::Dead),
                attempts: u32::try_from(r.attempts).unwrap_or_default(),
                mall,
            };
            match status.products.last_mut() {
                Some(p) if p.index == index => p.malls.push(item),
                _ => status.products.push(ProductStatus {
                    index,
                    code: r.product_code,
                    name: r.product_name,
                    hints: stored_hints(r.product_brand, r.product_model_code, r.product_gtin)?,
                    malls: vec![item],
                }),
            }
        }
        Ok(status)
    }

    /// A search's version alone (cheap; what watchers poll). `None`: no such search.
    pub async fn version(&self, search_id: i64) -> Result<Option<i64>, Error> {
        Ok(sqlx::query_file!("src/search/sql/version.sql", search_id)
            .fetch_one(self.pool())
            .await?
            .version)
    }

    /// One job; [`Error::NotFound`] for an unknown id, or for a job none of `client`'s
    /// searches uses (`None`: any client's, an admin).
    #[instrument(name = "search.job", skip_all, fields(job.id = job_id), err(level = "info"))]
    pub async fn job(&self, job_id: i64, client: Option<&str>) -> Result<JobInfo, Error> {
        let r = sqlx::query_file!("src/search/sql/job.sql", job_id, client)
            .fetch_optional(self.pool())
            .await?
            .ok_or(Error::NotFound("job", job_id))?;
        let mall = MallId::new(r.mall)?;
        let rounds = match r.rounds {
            None => Vec::new(),
            Some(value) => serde_json::from_value::<Vec<RoundReport>>(value).unwrap_or_else(|e| {
                warn!(job.id = job_id, error = %e, "stored rounds do not parse; not shown");
                Vec::new()
            }),
        };
        Ok(JobInfo {
            job_id: r.job_id,
            product_code: r.product_code,
            product_name: r.product_name,
            hints: stored_hints(r.product_brand, r.product_model_code, r.product_gtin)?,
            offers: r
                .offers
                .0
                .into_iter()
                .map(|o| o.into_offer(&mall))
                .collect(),
            mall,
            state: r.state,
            priority: u8::try_from(r.priority).unwrap_or(u8::MAX),
            attempts: u32::try_from(r.attempts).unwrap_or_default(),
            max_attempts: u32::try_from(r.max_attempts).unwrap_or_default(),
            reclaims: u32::try_from(r.reclaims).unwrap_or_default(),
            lease_epoch: r.lease_epoch,
            node_id: r.node_id,
            created_at: r.created_at,
            run_after: r.run_after,
            run_started_at: r.run_started_at,
            deadline_at: r.deadline_at,
            finished_at: r.finished_at,
            outcome: r.outcome,
            error_class: r.error_class,
            last_error: r.last_error,
            rounds,
            bytes: u64::try_from(r.bytes).unwrap_or_default(),
            cost_usd: r.cost_usd,
            runs: r.runs.0,
            traceparent: r.traceparent,
        })
    }

    /// A product's price observations, newest first: one page of at most `query.limit`
    /// (1..=1000) entries observed at or after `query.since` (default: 30 days ago), complete
    /// ones only unless asked, after `query.after`, of `query.client` (its own and those of
    /// no client; `None`: every client's). The product is keyed by its identity within
    /// its client ([`ProductSpec::identity`]).
    #[instrument(name = "search.price_history", skip_all, err(level = "info"))]
    pub async fn price_history(
        &self,
        product: &ProductSpec,
        query: &HistoryQuery,
    ) -> Result<Page<PriceHistoryEntry>, Error> {
        let limit = query.limit;
        if !(1..=MAX_HISTORY_LIMIT).contains(&limit) {
            return Err(FieldError::new(
                "page_size",
                format!("must be 1..={MAX_HISTORY_LIMIT}, got {limit}"),
            )
            .into());
        }
        let since = match query.since {
            Some(since) => since,
            None => {
                let now = self.now.unwrap_or_else(Utc::now);
                now - chrono::Duration::from_std(DEFAULT_HISTORY_WINDOW).unwrap_or_default()
            }
        };
        let key = product.identity();
        let rows = sqlx::query_file!(
            "src/search/sql/price_history.sql",
            key,
            since,
            i64::from(limit) + 1,
            query.include_incomplete,
            query.after.map(|c| c.observed_at),
            query.after.map(|c| c.id),
            query.client.as_deref(),
            query.search_id,
        )
        .fetch_all(self.pool())
        .await?;
        Ok(Page::of(rows, limit, |r| PriceHistoryEntry {
            id: r.id,
            search_id: r.search_id,
            observed_at: r.observed_at,
            lowest_effective_price: r.lowest_effective_price,
            lowest_mall: r.lowest_mall,
            malls: mall_prices(r.malls),
            covered_malls: r.covered_malls,
            complete: r.complete,
            client: r.client,
            schedule_id: r.schedule_id,
            product_code: r.product_code,
            product_name: r.product_name,
        }))
    }

    /// One page of searches, newest first: `client`'s (`None`: every client's), before
    /// search `before` when given, at most `limit`.
    #[instrument(name = "search.list", skip_all, err(level = "info"))]
    pub async fn list(
        &self,
        client: Option<&str>,
        before: Option<i64>,
        limit: u32,
    ) -> Result<Page<SearchSummary>, Error> {
        let rows = sqlx::query_file!(
            "src/search/sql/list.sql",
            client,
            before,
            i64::from(limit) + 1
        )
        .fetch_all(self.pool())
        .await?;
        let count = |n: i64| u32::try_from(n).unwrap_or(u32::MAX);
        Ok(Page::of(rows, limit, |r| SearchSummary {
            search_id: r.search_id,
            client: r.client,
            caller: r.caller,
            created_at: r.created_at,
            cancelled_at: r.cancelled_at,
            products: count(r.products),
            items: count(r.items),
            final_items: count(r.final_items),
            version: r.version,
        }))
    }

    /// Cancels a search: marks it cancelled, cancels its queued and running jobs that no
    /// other active search shares (one transaction), then tells the nodes running the
    /// cancelled ones to stop. Repeating it is harmless.
    ///
    /// A client (`client`) cancels only its own searches: another's is [`Error::NotFound`];
    /// `None`: any (an admin).
    ///
    /// NB: a failure to send the node messages is logged, not returned: the jobs are already
    /// cancelled in the database, so the node's next heartbeat is answered with the cancel.
    #[instrument(name = "search.cancel", skip_all, fields(search.id = search_id), err(level = "info"))]
    pub async fn cancel(
        &self,
        search_id: i64,
        client: Option<&str>,
    ) -> Result<CancelReport, Error> {
        let SearchCancelled { locked, cancelled } =
            self.queue.cancel_search(search_id, client).await?;
        let count = |state| {
            let n = cancelled.iter().filter(|c| c.was == state).count();
            u32::try_from(n).unwrap_or(u32::MAX)
        };
        let report = CancelReport {
            cancelled_queued: count(JobState::Queued),
            cancelling_running: count(JobState::Running),
            kept_shared: u32::try_from(locked.saturating_sub(cancelled.len())).unwrap_or(u32::MAX),
            cancelled,
        };
        if report.cancelling_running > 0 {
            let reason = format!("search {search_id} cancelled");
            if let Err(e) = control::send_cancels(self.pool(), &report.cancelled, &reason).await {
                warn!(search.id = search_id, error = %e, "cancel messages not sent; nodes learn it at their next heartbeat");
            }
        }
        Ok(report)
    }

    /// Puts dead jobs back in the queue with fresh attempts. Per product and mall only the
    /// newest dead job is retried, and none whose key already has an active job. Returns
    /// the ids of the requeued jobs.
    #[instrument(name = "search.retry_dead", skip_all, err(level = "info"))]
    pub async fn retry_dead(&self, filter: &RetryDeadFilter) -> Result<Vec<i64>, Error> {
        self.queue.retry_dead(filter).await
    }
}

/// `price_history.malls` leniently: entries that are not objects are skipped, missing
/// fields default.
fn mall_prices(value: serde_json::Value) -> Vec<MallPrice> {
    let serde_json::Value::Array(items) = value else {
        return Vec::new();
    };
    items
        .into_iter()
        .filter_map(|item| serde_json::from_value::<MallPrice>(item).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mall_prices_read_leniently() {
        let v = serde_json::json!([
            {"mall": "naver", "price": 100, "shipping_fee": 10, "effective_price": 110,
             "url": "u", "title": "t", "extra": true},
            {"mall": "coupang"},
            42
        ]);
        let prices = mall_prices(v);
        assert_eq!(prices.len(), 2);
        assert_eq!(prices[0].effective_price, 110);
        assert_eq!(prices[1].mall, "coupang");
        assert_eq!(prices[1].price, 0);
        assert!(mall_prices(serde_json::json!({"not": "an array"})).is_empty());
    }
}
