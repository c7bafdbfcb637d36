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
    let config = cli.serve.validate()?;
    let format = if config.json_logs {
        LogFormat::Json
    } else {
        LogFormat::Text
    };
    let telemetry = lps_telemetry::init("lps-coordinator", format)?;
    if let Some(Command::Migrate) = cli.command {
        let pool = db::connect(&config.database_url, 2)
            .await
            .context("connecting to DATABASE_URL")?;
        db::migrate(&pool).await.context("applying migrations")?;
        info!("migrations applied");
        telemetry.shutdown();
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
            telemetry.shutdown();
            return Err(e);
        }
    }
    running.shutdown().await;
    telemetry.shutdown();
    Ok(())
}
