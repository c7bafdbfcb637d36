//! gRPC adapters: thin translations between `pb::` messages and the queue, ledger and
//! dispatch APIs. Validation happens in `lps_proto::model` conversions; every error
//! becomes a status in exactly one place, `crate::error::status` (re-exported here with
//! its builders for the adapters).

pub mod admission;
pub mod deadline;
pub mod limits;
pub mod node;
pub mod observe;
pub mod ops;
pub mod paging;
pub mod schedule;
pub mod search;

pub use crate::error::{ERROR_DOMAIN, invalid, refused, status, unavailable};
