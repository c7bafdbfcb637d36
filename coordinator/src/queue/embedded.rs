//! Transitions of `job` that run on a connection another module holds, because they belong
//! to its transaction or its connection: the IP burn of a block (in the ledger's release of
//! the port, so the port's cooldown and the job's count commit together) and retention's
//! batches of final searches and finished jobs (on the sweep's connection, which holds its
//! advisory lock). They are here so that the queue stays the one writer of `job` and
//! `search_request`.

use chrono::{DateTime, Utc};
use sqlx::PgConnection;

/// One batch of [`retire_searches`] or [`retire_finished`]: rows deleted, rows scanned (at most the batch size;
/// fewer means the rule reached its age limit) and the key of the last one scanned.
#[derive(Debug)]
pub struct Retired {
    pub deleted: i64,
    pub scanned: i64,
    pub last_at: Option<DateTime<Utc>>,
    pub last_id: Option<i64>,
}

/// Counts an IP burned by a block against job `job_id` (`sql/burn_ip.sql`), on the
/// ledger's transaction. Returns the job's burns now; `None`: no such job.
pub async fn burn_ip(conn: &mut PgConnection, job_id: i64) -> Result<Option<i16>, sqlx::Error> {
    sqlx::query_file_scalar!("src/queue/sql/burn_ip.sql", job_id)
        .fetch_optional(conn)
        .await
}

/// Deletes one retention batch of jobs finished longer than `age_ms` ago, after the
/// `(finished_at, job_id)` cursor, at most `limit` scanned, with their attempts, offers,
/// stale reports and negative-cache rows (`sql/retire_finished.sql` says which stay).
pub async fn retire_finished(
    conn: &mut PgConnection,
    age_ms: i64,
    limit: i64,
    (after_at, after_id): (DateTime<Utc>, i64),
) -> Result<Retired, sqlx::Error> {
    sqlx::query_file_as!(
        Retired,
        "src/queue/sql/retire_finished.sql",
        age_ms,
        limit,
        after_at,
        after_id
    )
    .fetch_one(conn)
    .await
}

/// Deletes one retention batch of final searches made longer than `age_ms` ago, after the
/// `(created_at, search_id)` cursor, at most `limit` scanned, with their items and delivered
/// events (`sql/retire_searches.sql` says which stay).
pub async fn retire_searches(
    conn: &mut PgConnection,
    age_ms: i64,
    limit: i64,
    (after_at, after_id): (DateTime<Utc>, i64),
) -> Result<Retired, sqlx::Error> {
    sqlx::query_file_as!(
        Retired,
        "src/queue/sql/retire_searches.sql",
        age_ms,
        limit,
        after_at,
        after_id
    )
    .fetch_one(conn)
    .await
}
