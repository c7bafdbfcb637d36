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

/// Whether `e` means PostgreSQL could not be reached (a retry later can succeed), as
/// opposed to the statement failing. The one place this policy lives: `error::Error` and
/// `ledger::Error` both map through it.
pub fn is_unavailable(e: &sqlx::Error) -> bool {
    matches!(
        e,
        sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::WorkerCrashed
    )
}
