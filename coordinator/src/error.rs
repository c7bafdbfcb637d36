//! The coordinator's one service error and its one mapping to gRPC statuses. A leaf: the
//! queue, the ledger, search, delivery, dispatch and the gRPC adapters all fail with
//! [`Error`] (the ledger's own error converts into it) and answer with [`status`] or the
//! builders ([`invalid`], [`unavailable`], [`refused`]); none imports another module for
//! them. Messages never carry SQL or driver text; internal causes are logged where they
//! become a status.
//!
//! Statuses carry the rich error model (`google.rpc.Status` details) that other languages'
//! gRPC tooling decodes: INVALID_ARGUMENT a `BadRequest` with the field violation,
//! UNAVAILABLE and RESOURCE_EXHAUSTED (database faults, see [`outage`]) a `RetryInfo`, UNAUTHENTICATED and PERMISSION_DENIED an `ErrorInfo` (reason,
//! domain [`ERROR_DOMAIN`]), each beside the same message as before.

use std::{sync::Arc, time::Duration};

use lps_proto::model::{FieldError, Lease};
use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt as _};
use tracing::error;

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
    /// PostgreSQL cannot be reached or cannot write (a [`crate::db::Fault`]: lost
    /// connection, full disk, read-only, statement timeout, shutdown); safe to retry.
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

impl From<Error> for Status {
    fn from(e: Error) -> Self {
        status(e)
    }
}

/// The one mapping from service errors (the queue's, the ledger's through `From`) to
/// gRPC statuses. Client-visible messages never carry
/// SQL or driver text; internal causes are logged here, where they are handled.
pub fn status(e: impl Into<Error>) -> Status {
    match e.into() {
        Error::InvalidArgument(f) => invalid(f),
        Error::LeaseLost(lease) => Status::failed_precondition(format!(
            "lease of job {} at epoch {} is no longer current",
            lease.job_id, lease.epoch
        )),
        Error::NotFound(what, id) => Status::not_found(format!("{what} {id} not found")),
        Error::Precondition(message) => Status::failed_precondition(message),
        Error::KeyReused { key, what, id } => {
            let message = format!(
                "idempotency_key {key:?} was used for {what} {id} with a different request; \
                 use a new key for a new request"
            );
            let details = ErrorDetails::with_error_info(
                "IDEMPOTENCY_KEY_REUSED",
                ERROR_DOMAIN,
                std::collections::HashMap::from([
                    ("idempotency_key".to_owned(), key),
                    (format!("{what}_id"), id.to_string()),
                ]),
            );
            Status::with_error_details(Code::AlreadyExists, message, details)
        }
        Error::Unavailable(cause) => {
            let fault = crate::db::fault(&cause).unwrap_or(crate::db::Fault::Unreachable);
            error!(error = %cause, fault = fault.label(), "database fault");
            outage(fault)
        }
        Error::Database(cause) => {
            error!(error = %cause, "database error");
            Status::internal("internal error")
        }
        Error::Internal(cause) => {
            error!(error = %cause, "internal error");
            Status::internal("internal error")
        }
    }
}

/// The `ErrorInfo.domain` of LPS's errors.
pub const ERROR_DOMAIN: &str = "lps.v1";

/// `InvalidArgument` naming the field: `products[3].name: longer than 200 characters`, with
/// a `BadRequest` field violation (`products[3].name`, `longer than 200 characters`).
pub fn invalid(f: FieldError) -> Status {
    let details = ErrorDetails::with_bad_request_violation(f.field.clone(), f.reason.clone());
    Status::with_error_details(Code::InvalidArgument, f.to_string(), details)
}

/// `Unavailable` with a `RetryInfo` saying when to try again.
pub fn unavailable(message: impl Into<String>, retry_after: Duration) -> Status {
    Status::with_error_details(
        Code::Unavailable,
        message,
        ErrorDetails::with_retry_info(Some(retry_after)),
    )
}

/// The status for a database fault: RESOURCE_EXHAUSTED for a full disk or another exhausted
/// resource, UNAVAILABLE for the rest, both with a `RetryInfo` and a message naming the
/// fault (`database read-only (cannot write); retry`) and an `ErrorInfo` whose reason names
/// it too (`DATABASE_READ_ONLY`, `DATABASE_DISK_FULL`, ...: `DATABASE_` and the
/// [`crate::db::Fault::label`] in capitals).
pub fn outage(fault: crate::db::Fault) -> Status {
    let code = if fault.is_exhaustion() {
        Code::ResourceExhausted
    } else {
        Code::Unavailable
    };
    let mut details = ErrorDetails::with_retry_info(Some(OUTAGE_RETRY));
    details.set_error_info(
        format!("DATABASE_{}", fault.label().to_ascii_uppercase()),
        ERROR_DOMAIN,
        std::collections::HashMap::<String, String>::new(),
    );
    Status::with_error_details(code, format!("{}; retry", fault.describe()), details)
}

/// When a caller refused for a database fault is told to retry.
pub const OUTAGE_RETRY: Duration = Duration::from_secs(1);

/// Whether `status` is one [`status`] gives a database fault ([`outage`]): the call can
/// succeed later and nothing about it was wrong.
pub fn is_outage(status: &Status) -> bool {
    matches!(status.code(), Code::Unavailable | Code::ResourceExhausted)
        && status.message().starts_with("database ")
}

/// An auth refusal (`Unauthenticated`, `PermissionDenied`) with an `ErrorInfo`: `reason` is
/// a stable UPPER_SNAKE_CASE code a client can branch on.
pub fn refused(code: Code, reason: &str, message: impl Into<String>) -> Status {
    let details = ErrorDetails::with_error_info(
        reason,
        ERROR_DOMAIN,
        std::collections::HashMap::<String, String>::new(),
    );
    Status::with_error_details(code, message, details)
}
