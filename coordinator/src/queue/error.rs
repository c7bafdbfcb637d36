//! `queue::Error`: what a queue call can fail with. Mapped to a gRPC status in one place
//! (`grpc::status`); messages never carry SQL or driver text.

use std::sync::Arc;

use lps_proto::model::{FieldError, Lease};

/// Cloneable: one failed batch answers each of its callers (the database causes are
/// shared).
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// The caller's input broke a rule; nothing was stored.
    #[error(transparent)]
    InvalidArgument(#[from] FieldError),
    /// The lease is no longer current (reclaimed, reaped, cancelled or finished): the report
    /// was recorded as stale and changed nothing.
    #[error("lease of job {} at epoch {} is no longer current", .0.job_id, .0.epoch)]
    LeaseLost(Lease),
    #[error("{0} {1} not found")]
    NotFound(&'static str, i64),
    /// The thing exists but is not in the state the call needs (a delivery retried that
    /// is not dead); the message says which state it is in.
    #[error("{0}")]
    Precondition(String),
    /// The client's idempotency key names an earlier search (or schedule: `what`) with a
    /// different request.
    #[error("idempotency key {key:?} was used for {what} {id} with a different request")]
    KeyReused {
        key: String,
        what: &'static str,
        id: i64,
    },
    /// PostgreSQL cannot be reached; safe to retry.
    #[error("database unavailable")]
    Unavailable(#[source] Arc<sqlx::Error>),
    #[error("database error")]
    Database(#[source] Arc<sqlx::Error>),
    #[error("internal error: {0}")]
    Internal(String),
}

impl Error {
    /// Like `From<sqlx::Error>`, but a constraint violation becomes `InvalidArgument` naming
    /// `field` (the input the constraint guards).
    pub(crate) fn from_db(e: sqlx::Error, field: &str) -> Self {
        match &e {
            sqlx::Error::Database(db) if db.is_check_violation() || db.is_unique_violation() => {
                FieldError::new(field, "conflicts with stored data").into()
            }
            _ => e.into(),
        }
    }

    /// Whether retrying the same call later can succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Unavailable(_))
    }
}

impl From<sqlx::Error> for Error {
    fn from(e: sqlx::Error) -> Self {
        if crate::db::is_unavailable(&e) {
            Self::Unavailable(Arc::new(e))
        } else {
            Self::Database(Arc::new(e))
        }
    }
}
