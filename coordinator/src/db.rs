//! The PostgreSQL pool and the embedded migrations (`migrations/` at the repository root).
//!
//! `migrate` runs under sqlx's advisory lock, so replicas starting together apply each
//! migration once.

use std::time::Duration;

use std::str::FromStr as _;

use sqlx::{
    PgPool,
    migrate::Migrator,
    postgres::{PgConnectOptions, PgPoolOptions},
};

/// The schema, embedded at build time.
pub static MIGRATOR: Migrator = sqlx::migrate!("../migrations");

/// Opens a pool of at most `max_connections` to `url`, with the connection settings every LPS
/// connection uses.
pub async fn connect(url: &str, max_connections: u32) -> Result<PgPool, sqlx::Error> {
    PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(Duration::from_secs(5))
        .connect_with(connect_options(url)?)
        .await
}

/// `url` with LPS's connection settings:
/// - `jit = off`: the queue's statements are short OLTP statements whose planner estimates
///   (LIMIT $n over lateral joins) look expensive; JIT compiled them on every execution and
///   cost ~40 ms a claim.
/// - `plan_cache_mode = force_generic_plan`: every statement is prepared once per connection
///   and its shape does not depend on parameter values, so re-planning (1–2 ms for the claim)
///   on each call buys nothing.
pub fn connect_options(url: &str) -> Result<PgConnectOptions, sqlx::Error> {
    Ok(PgConnectOptions::from_str(url)?
        .application_name("lps")
        .options([("jit", "off"), ("plan_cache_mode", "force_generic_plan")]))
}

/// Applies every pending migration.
pub async fn migrate(pool: &PgPool) -> Result<(), sqlx::migrate::MigrateError> {
    MIGRATOR.run(pool).await
}

/// Whether `e` is a fault of the database rather than of the statement (see [`fault`]): a
/// retry later can succeed, and nothing about the job or the caller's input caused it. The
/// one place this policy lives: `error::Error` and `ledger::Error` both map through it.
pub fn is_unavailable(e: &sqlx::Error) -> bool {
    fault(e).is_some()
}

/// A database fault: an outage of the storage LPS writes to, not a fault of the statement,
/// the job or the caller's input (DESIGN §2 "Database outages"). Callers get UNAVAILABLE or
/// RESOURCE_EXHAUSTED naming it, never INTERNAL; node reports it keeps from being written
/// wait and are written when it is over; no lease is charged for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The connection failed or could not be made (I/O, TLS, a pool that timed out or
    /// closed, SQLSTATE class 08).
    Unreachable,
    /// The disk is full (SQLSTATE 53100 `disk_full`).
    DiskFull,
    /// The server ran out of another resource (SQLSTATE class 53: memory, connections,
    /// a configured limit).
    OutOfResources,
    /// The database accepts reads only (SQLSTATE 25006 `read_only_sql_transaction`: a hot
    /// standby, `default_transaction_read_only`, a failover in progress).
    ReadOnly,
    /// The statement was cancelled, by a `statement_timeout` or an operator (SQLSTATE
    /// 57014 `query_canceled`), or gave up on a lock (55P03 `lock_not_available`).
    Timeout,
    /// The server is shutting down, crashed or still starting (SQLSTATE 57P01
    /// `admin_shutdown`, 57P02 `crash_shutdown`, 57P03 `cannot_connect_now`).
    ShuttingDown,
    /// The server could not read or write its files (SQLSTATE 58030 `io_error`).
    StorageIo,
}

impl Fault {
    /// What a caller is told (no SQL, no driver text).
    pub fn describe(self) -> &'static str {
        match self {
            Self::Unreachable => "database unavailable",
            Self::DiskFull => "database disk full",
            Self::OutOfResources => "database out of resources",
            Self::ReadOnly => "database read-only (cannot write)",
            Self::Timeout => "database statement timed out",
            Self::ShuttingDown => "database shutting down",
            Self::StorageIo => "database storage I/O error",
        }
    }

    /// The label of `lps_database_faults_total`.
    pub fn label(self) -> &'static str {
        match self {
            Self::Unreachable => "unreachable",
            Self::DiskFull => "disk_full",
            Self::OutOfResources => "out_of_resources",
            Self::ReadOnly => "read_only",
            Self::Timeout => "timeout",
            Self::ShuttingDown => "shutting_down",
            Self::StorageIo => "storage_io",
        }
    }

    /// A resource ran out (RESOURCE_EXHAUSTED rather than UNAVAILABLE).
    pub fn is_exhaustion(self) -> bool {
        matches!(self, Self::DiskFull | Self::OutOfResources)
    }
}

/// The database fault `e` is, if it is one (as opposed to the statement failing).
pub fn fault(e: &sqlx::Error) -> Option<Fault> {
    match e {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => Some(Fault::Unreachable),
        sqlx::Error::Database(db) => fault_of_sqlstate(db.code().as_deref()?),
        _ => None,
    }
}

/// The fault a SQLSTATE names, if any.
pub fn fault_of_sqlstate(code: &str) -> Option<Fault> {
    match code {
        "53100" => Some(Fault::DiskFull),
        c if c.starts_with("53") => Some(Fault::OutOfResources),
        "25006" => Some(Fault::ReadOnly),
        "57014" | "55P03" => Some(Fault::Timeout),
        "57P01" | "57P02" | "57P03" => Some(Fault::ShuttingDown),
        "58030" => Some(Fault::StorageIo),
        c if c.starts_with("08") => Some(Fault::Unreachable),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_faults_are_told_from_statement_errors() {
        assert_eq!(fault_of_sqlstate("53100"), Some(Fault::DiskFull));
        assert_eq!(fault_of_sqlstate("53200"), Some(Fault::OutOfResources));
        assert_eq!(fault_of_sqlstate("53300"), Some(Fault::OutOfResources));
        assert_eq!(fault_of_sqlstate("25006"), Some(Fault::ReadOnly));
        assert_eq!(fault_of_sqlstate("57014"), Some(Fault::Timeout));
        for c in ["57P01", "57P02", "57P03"] {
            assert_eq!(fault_of_sqlstate(c), Some(Fault::ShuttingDown), "{c}");
        }
        assert_eq!(fault_of_sqlstate("08006"), Some(Fault::Unreachable));
        assert_eq!(fault_of_sqlstate("58030"), Some(Fault::StorageIo));
        // The statement's own errors stay errors: a constraint, a syntax error, a
        // serialization failure (retried by whoever runs the transaction).
        for c in ["23505", "23514", "42601", "40001", "22P02"] {
            assert_eq!(fault_of_sqlstate(c), None, "{c}");
        }
        assert!(Fault::DiskFull.is_exhaustion() && !Fault::ReadOnly.is_exhaustion());
    }
}
