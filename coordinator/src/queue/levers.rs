//! The operator's and client's levers on jobs: cancelling a search ([`Queue::cancel_search`]),
//! putting dead jobs back ([`Queue::retry_dead`]) and forgetting a product's remembered
//! not-found answers ([`Queue::clear_negative_cache`]). The search and ops adapters
//! validate the caller and tell the nodes; the job and cache rows change only here.
//!
//! Cancellation safety: `cancel_search` is one transaction (mark, lock, cancel), so an
//! aborted call committed all of it or nothing; `retry_dead` is one statement per try,
//! `clear_negative_cache` one statement.

use chrono::{DateTime, Utc};
use lps_proto::model::{FieldError, JobState, Lease, MallId, ProductSpec};
use tracing::instrument;

use super::{Cancelled, Error, JOB_CHANNEL, Queue};

/// Most job ids one RetryDead call may name.
pub const MAX_RETRY_IDS: usize = 10_000;

/// What [`Queue::cancel_search`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchCancelled {
    /// The search's active jobs, locked for the cancel (shared ones included).
    pub locked: usize,
    /// The jobs it cancelled (the others are shared with another active search).
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

impl Queue {
    /// Deletes the negative-cache entries of `product` on `malls` (empty: every mall), every
    /// set of hints it was asked with; returns how many. An entry is the product's when its
    /// crawl is the product's name ([`ProductSpec::crawl_key`]), or when a search asked for
    /// the product's code under it (any client's: an operator's tool), or when it is an
    /// entry from before crawls were keyed by name (keyed by the identity). The next
    /// search for it on those malls crawls again.
    #[instrument(name = "queue.clear_negative_cache", skip_all, err(level = "info"))]
    pub async fn clear_negative_cache(
        &self,
        product: &ProductSpec,
        malls: &[MallId],
    ) -> Result<u64, Error> {
        let malls: Vec<String> = malls.iter().map(ToString::to_string).collect();
        let keys = [product.identity(), product.crawl_key()];
        let done = sqlx::query!(
            "delete from negative_cache n using job j
             where j.job_id = n.job_id
               and (cardinality($2::text[]) = 0 or j.mall = any($2))
               and (j.product_key = any($1)
                    or exists (select 1 from search_item si
                               join search_product sp on sp.search_id = si.search_id
                                                     and sp.product_index = si.product_index
                               where si.job_id = n.job_id and sp.product_key = $3))",
            &keys,
            &malls,
            product.identity(),
        )
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected())
    }

    /// Cancels a search in one transaction: marks it cancelled (the first cancel time is
    /// kept), locks its active jobs in job order, and cancels those no other active search
    /// shares — queued ones in place, running ones with their lease ended now (the node's
    /// late report is stale; the run is recorded as a cancelled attempt). Repeating it is
    /// harmless. Returns the cancelled jobs with the node of each running one, so it can be
    /// told to stop.
    ///
    /// A client (`client`) cancels only its own searches: another's is [`Error::NotFound`];
    /// `None`: any (an admin).
    #[instrument(name = "queue.cancel_search", skip_all, fields(search.id = search_id), err(level = "info"))]
    pub async fn cancel_search(
        &self,
        search_id: i64,
        client: Option<&str>,
    ) -> Result<SearchCancelled, Error> {
        let mut tx = self.pool.begin().await?;
        sqlx::query_file!("src/queue/sql/cancel_mark.sql", search_id, self.now, client)
            .fetch_optional(&mut *tx)
            .await?
            .ok_or(Error::NotFound("search", search_id))?;
        let locked = sqlx::query_file_scalar!("src/queue/sql/cancel_lock.sql", search_id)
            .fetch_all(&mut *tx)
            .await?;
        let rows = sqlx::query_file!(
            "src/queue/sql/cancel_jobs.sql",
            search_id,
            &locked,
            self.now
        )
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(SearchCancelled {
            locked: locked.len(),
            cancelled: rows
                .into_iter()
                .map(|r| Cancelled {
                    lease: Lease {
                        job_id: r.job_id,
                        epoch: r.lease_epoch,
                    },
                    was: r.prev_state,
                    node: r.prev_node,
                })
                .collect(),
        })
    }

    /// Puts dead jobs back in the queue with fresh attempts, runnable now. Per product and
    /// mall only the newest dead job is retried, and none whose key already has an active
    /// job. Returns the ids of the requeued jobs.
    #[instrument(name = "queue.retry_dead", skip_all, err(level = "info"))]
    pub async fn retry_dead(&self, filter: &RetryDeadFilter) -> Result<Vec<i64>, Error> {
        if filter.job_ids.len() > MAX_RETRY_IDS {
            return Err(FieldError::new(
                "job_ids",
                format!("at most {MAX_RETRY_IDS} ids per call"),
            )
            .into());
        }
        if let Some(i) = filter.job_ids.iter().position(|id| *id <= 0) {
            return Err(FieldError::new(format!("job_ids[{i}]"), "must be positive").into());
        }
        let ids = (!filter.job_ids.is_empty()).then_some(filter.job_ids.as_slice());
        let mall = filter.mall.as_ref().map(MallId::as_str);
        // NB: a concurrent enqueue of the same product and mall can win the active slot
        // between the statement's snapshot and its update (a unique violation); a fresh
        // statement then skips that key.
        let mut tries = 0;
        loop {
            tries += 1;
            let result = sqlx::query_file!(
                "src/queue/sql/retry_dead.sql",
                ids,
                mall,
                filter.since,
                self.now,
                JOB_CHANNEL,
            )
            .fetch_one(&self.pool)
            .await;
            match result {
                Ok(row) => return Ok(row.job_ids),
                Err(sqlx::Error::Database(db)) if db.is_unique_violation() && tries < 3 => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
}
