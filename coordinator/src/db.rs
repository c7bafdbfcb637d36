//! The PostgreSQL pool and the embedded migrations (`migrations/` at the repository root).
//!
//! `migrate` runs under sqlx's advisory lock, so replicas starting together apply each
//! migration once.

use std::time::Duration;

use sqlx::{PgPool, migrate::Migrator, postgres::PgPoolOptions};

/// The schema, embedded at build time.
pub static MIGRATOR: Migrator = sqlx::migrate!("../migrations");

/// Opens a pool of at most `max_connections` to `url`.
pub async fn connect(url: &str, max_connections: u32) -> Result<PgPool, sqlx::Error> {
    PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(Duration::from_secs(5))
        .connect(url)
        .await
}

/// Applies every pending migration.
pub async fn migrate(pool: &PgPool) -> Result<(), sqlx::migrate::MigrateError> {
    MIGRATOR.run(pool).await
}
