//! gRPC adapters: thin translations between `pb::` messages and the queue, ledger and
//! dispatch APIs. Validation happens in `lps_proto::model` conversions; every error
//! becomes a status in exactly one place, [`status`].

pub mod deadline;
pub mod node;
pub mod ops;
pub mod search;

use lps_proto::model::FieldError;
use tonic::Status;
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
        queue::Error::Unavailable(cause) => {
            error!(error = %cause, "database unavailable");
            Status::unavailable("database unavailable; retry")
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

/// `InvalidArgument` naming the field: `products[3].name: longer than 200 characters`.
pub fn invalid(f: FieldError) -> Status {
    Status::invalid_argument(f.to_string())
}
