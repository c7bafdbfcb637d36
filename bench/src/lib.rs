//! What the benchmark binaries share.

use anyhow::Context as _;
use lps_coordinator::db;

/// Drops and re-creates database `name` on the server `server_url` names (closing any
/// connection a previous run left), and returns the URL of the new database.
pub async fn fresh_database(server_url: &str, name: &str) -> anyhow::Result<String> {
    anyhow::ensure!(
        name.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
        "database name {name:?} is not a plain identifier"
    );
    let admin = db::connect(server_url, 2)
        .await
        .context("connecting to DATABASE_URL")?;
    for sql in [
        format!("drop database if exists {name} with (force)"),
        format!("create database {name}"),
    ] {
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .execute(&admin)
            .await?;
    }
    admin.close().await;
    Ok(with_database(server_url, name))
}

/// `url` with its database replaced by `db` (query parameters kept).
fn with_database(url: &str, db: &str) -> String {
    let (base, query) = url
        .split_once('?')
        .map_or((url, None), |(b, q)| (b, Some(q)));
    let base = base.rsplit_once('/').map_or(base, |(b, _)| b);
    match query {
        Some(q) => format!("{base}/{db}?{q}"),
        None => format!("{base}/{db}"),
    }
}
