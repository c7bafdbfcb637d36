//! `crawler-node`: parse the settings, start logging and the HTTP probes, run the node
//! until it has drained. SIGTERM or SIGINT starts the drain; a second one exits at once.
//! Exit code 0 after a clean drain, 1 when the node failed, 2 for bad settings.

use std::process::ExitCode;

use anyhow::Context as _;
use clap::Parser as _;
use lps_crawler_node::{
    Node, NodeError, ScriptedExecutor,
    config::{Config, ExecutorKind, LogFormat},
    health,
};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument as _, error, info, info_span, warn};
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() -> ExitCode {
    let config = Config::parse();
    init_tracing(config.log_format);
    if let Err(err) = config.validate() {
        error!(setting = err.setting, error = %err, "invalid configuration");
        return ExitCode::from(2);
    }
    match run(config).await {
        Ok(()) => {
            info!("crawler node drained; exiting");
            ExitCode::SUCCESS
        }
        Err(err) => {
            // NB: `Node::run` logged its own error (`#[instrument(err)]`) already.
            if err.downcast_ref::<NodeError>().is_none() {
                error!(error = format!("{err:#}"), "crawler node failed");
            }
            info!(exit_code = 1, "crawler node exiting");
            ExitCode::FAILURE
        }
    }
}

async fn run(config: Config) -> anyhow::Result<()> {
    let node = match config.executor {
        ExecutorKind::Scripted => Node::new(config.clone(), ScriptedExecutor::new()),
    };
    info!(
        node.id = node.node_id(),
        coordinator = %config.coordinator_url,
        slots = config.slots,
        executor = ?config.executor,
        "crawler node starting"
    );
    let listener = tokio::net::TcpListener::bind(config.http_addr)
        .await
        .with_context(|| format!("LPS_HTTP_ADDR: cannot listen on {}", config.http_addr))?;
    let stop_http = CancellationToken::new();
    let mut http = tokio::spawn(
        health::serve(listener, node.handle(), stop_http.clone())
            .instrument(info_span!("node.http", addr = %config.http_addr)),
    );

    let shutdown = CancellationToken::new();
    tokio::spawn(watch_signals(shutdown.clone()).instrument(info_span!("node.signals")));

    let run = node.run(shutdown.clone());
    tokio::pin!(run);
    let result = tokio::select! {
        result = &mut run => result.map_err(anyhow::Error::from),
        joined = &mut http => {
            // NB: a probe server that dies would get the pod killed mid-job; drain instead.
            let why = match joined {
                Ok(Ok(())) => "the HTTP probe server stopped".to_owned(),
                Ok(Err(err)) => format!("the HTTP probe server failed: {err}"),
                Err(err) => format!("the HTTP probe server panicked: {err}"),
            };
            error!(reason = %why, "draining");
            shutdown.cancel();
            let _ = (&mut run).await;
            Err(anyhow::anyhow!(why))
        }
    };
    stop_http.cancel();
    result
}

/// Cancels `shutdown` on the first SIGTERM/SIGINT; exits at once on a second one.
#[cfg(unix)]
async fn watch_signals(shutdown: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let (mut term, mut int) = match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(term), Ok(int)) => (term, int),
        (Err(err), _) | (_, Err(err)) => {
            error!(error = %err, "cannot listen for signals");
            return;
        }
    };
    let mut first = true;
    loop {
        let signal = tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        };
        if first {
            info!(signal, "drain requested");
            shutdown.cancel();
            first = false;
        } else {
            warn!(signal, "second signal; exiting without draining");
            std::process::exit(130);
        }
    }
}

#[cfg(not(unix))]
async fn watch_signals(shutdown: CancellationToken) {
    if tokio::signal::ctrl_c().await.is_ok() {
        info!("drain requested");
        shutdown.cancel();
    }
}

fn init_tracing(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().flatten_event(true).init(),
    }
}
