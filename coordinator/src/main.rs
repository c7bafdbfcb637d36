//! `coordinator`: parse config, init telemetry, run the app until SIGTERM/SIGINT, then shut
//! down in order. `coordinator migrate` applies the migrations and exits.

use anyhow::Context as _;
use clap::Parser as _;
use lps_coordinator::{
    app,
    config::{Cli, Command},
    db,
};
use tokio::signal::unix::{SignalKind, signal};
use tracing::{error, info};
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let config = cli.serve.validate()?;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    if config.json_logs {
        tracing_subscriber::fmt()
            .json()
            .with_env_filter(filter)
            .init();
    } else {
        tracing_subscriber::fmt().with_env_filter(filter).init();
    }
    if let Some(Command::Migrate) = cli.command {
        let pool = db::connect(&config.database_url, 2)
            .await
            .context("connecting to DATABASE_URL")?;
        db::migrate(&pool).await.context("applying migrations")?;
        info!("migrations applied");
        return Ok(());
    }
    let mut running = app::start(config).await?;
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    tokio::select! {
        _ = term.recv() => info!("SIGTERM received"),
        _ = int.recv() => info!("SIGINT received"),
        e = running.wait() => {
            error!(error = %e, "a background task failed; shutting down");
            running.shutdown().await;
            return Err(e);
        }
    }
    running.shutdown().await;
    Ok(())
}
