//! `ledger::Error`: what a ledger call can fail with. Messages never carry SQL, driver
//! text or proxy credentials (no variant holds a config or a grant).

use lps_proto::model::FieldError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The caller's input broke a rule; nothing was stored.
    #[error(transparent)]
    InvalidArgument(#[from] FieldError),
    /// PostgreSQL cannot be reached; safe to retry.
    #[error("database unavailable")]
    Unavailable(#[source] sqlx::Error),
    #[error("database error")]
    Database(#[source] sqlx::Error),
    #[error("internal error: {0}")]
    Internal(String),
}

impl Error {
    /// Like `From<sqlx::Error>`, but a constraint violation becomes `InvalidArgument` naming
    /// `field` (the input the constraint guards).
    pub(crate) fn from_db(e: sqlx::Error, field: &str) -> Self {
        match &e {
            sqlx::Error::Database(db) if db.is_check_violation() => {
                FieldError::new(field, "out of range for the stored data").into()
            }
            _ => e.into(),
        }
    }

    /// Whether retrying the same call later can succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Unavailable(_))
    }
}

impl From<sqlx::Error> for Error {
    fn from(e: sqlx::Error) -> Self {
        if crate::db::is_unavailable(&e) {
            Self::Unavailable(e)
        } else {
            Self::Database(e)
        }
    }
}

/// A ledger failure as the coordinator's service error (one status mapping for both).
impl From<Error> for crate::error::Error {
    fn from(e: Error) -> Self {
        match e {
            Error::InvalidArgument(f) => Self::InvalidArgument(f),
            Error::Unavailable(cause) => Self::Unavailable(cause.into()),
            Error::Database(cause) => Self::Database(cause.into()),
            Error::Internal(cause) => Self::Internal(cause),
        }
    }
}
