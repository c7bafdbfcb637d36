//! `coordinator`: parse config, init telemetry, run the app until SIGTERM/SIGINT, then shut
//! down in order. `coordinator migrate` applies the migrations and exits.

use anyhow::Context as _;
use clap::Parser as _;
use lps_coordinator::{
    app,
    config::{Cli, Command},
    db,
};
use lps_telemetry::LogFormat;
use tokio::signal::unix::{SignalKind, signal};
use tracing::{error, info};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if let Some(Command::Migrate) = cli.command {
        // NB: only what migrating needs is validated; the chart's hook Job sets no tokens.
        let config = cli.serve.validate_migrate()?;
        let telemetry = lps_telemetry::init("lps-coordinator", log_format(config.json_logs))?;
        let pool = db::connect(&config.database_url, 2)
            .await
            .context("connecting to DATABASE_URL")?;
        db::migrate(&pool).await.context("applying migrations")?;
        info!("migrations applied");
        telemetry.shutdown();
        return Ok(());
    }
    let config = cli.serve.validate()?;
    let telemetry = lps_telemetry::init("lps-coordinator", log_format(config.json_logs))?;
    let mut running = app::start(config).await?;
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    tokio::select! {
        _ = term.recv() => info!("SIGTERM received"),
        _ = int.recv() => info!("SIGINT received"),
        e = running.wait() => {
            error!(error = %e, "a background task failed; shutting down");
            running.shutdown().await;
            telemetry.shutdown();
            return Err(e);
        }
    }
    running.shutdown().await;
    telemetry.shutdown();
    Ok(())
}

fn log_format(json: bool) -> LogFormat {
    if json {
        LogFormat::Json
    } else {
        LogFormat::Text
    }
}
