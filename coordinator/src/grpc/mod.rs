//! gRPC adapters: thin translations between `pb::` messages and the queue, ledger and
//! dispatch APIs. Validation happens in `lps_proto::model` conversions; every error
//! becomes a status in exactly one place, [`status`].
//!
//! Statuses carry the rich error model (`google.rpc.Status` details) that other languages'
//! gRPC tooling decodes: INVALID_ARGUMENT a `BadRequest` with the field violation,
//! UNAVAILABLE a `RetryInfo`, UNAUTHENTICATED and PERMISSION_DENIED an `ErrorInfo` (reason,
//! domain [`ERROR_DOMAIN`]), each beside the same message as before.

pub mod deadline;
pub mod limits;
pub mod node;
pub mod observe;
pub mod ops;
pub mod paging;
pub mod schedule;
pub mod search;

use std::time::Duration;

use lps_proto::model::FieldError;
use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt as _};
use tracing::error;

use crate::queue;

/// The one mapping from queue errors to gRPC statuses. Client-visible messages never carry
/// SQL or driver text; internal causes are logged here, where they are handled.
pub fn status(e: queue::Error) -> Status {
    match e {
        queue::Error::InvalidArgument(f) => invalid(f),
        queue::Error::LeaseLost(lease) => Status::failed_precondition(format!(
            "lease of job {} at epoch {} is no longer current",
            lease.job_id, lease.epoch
        )),
        queue::Error::NotFound(what, id) => Status::not_found(format!("{what} {id} not found")),
        queue::Error::Precondition(message) => Status::failed_precondition(message),
        queue::Error::KeyReused { key, what, id } => {
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
        queue::Error::Unavailable(cause) => {
            error!(error = %cause, "database unavailable");
            unavailable("database unavailable; retry", Duration::from_secs(1))
        }
        queue::Error::Database(cause) => {
            error!(error = %cause, "database error");
            Status::internal("internal error")
        }
        queue::Error::Internal(cause) => {
            error!(error = %cause, "internal error");
            Status::internal("internal error")
        }
    }
}

/// The mapping for ledger errors: the same rules as [`status`], through it.
pub fn ledger_status(e: crate::ledger::Error) -> Status {
    use crate::ledger::Error as L;
    status(match e {
        L::InvalidArgument(f) => queue::Error::InvalidArgument(f),
        L::Unavailable(cause) => queue::Error::Unavailable(cause.into()),
        L::Database(cause) => queue::Error::Database(cause.into()),
        L::Internal(cause) => queue::Error::Internal(cause),
    })
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
