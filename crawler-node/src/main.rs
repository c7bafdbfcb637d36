//! `crawler-node`: parse the settings, start logging/tracing and the HTTP server (probes
//! and metrics), run the node until it has drained, then close the browsers. SIGTERM or
//! SIGINT starts the drain; a second one exits at once. Exit code 0 after a clean drain, 1
//! when the node failed, 2 for bad settings.

use std::{process::ExitCode, sync::Arc, time::Duration};

use anyhow::Context as _;
use clap::Parser as _;
use lps_crawler_node::{
    BrowserExecutor, Node, NodeError, NodeMetrics, ScriptedExecutor,
    config::{Config, ExecutorKind, LogFormat, ProxyMode},
    executor::browser::BrowserSettings,
    health,
    llm::LlmClient,
    probe::ProbeArgs,
    proxy::NodeLink,
    selfcheck::{self, SelfCheckArgs},
};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument as _, error, info, info_span, warn};

/// Closing every browser and chromedriver after the node stopped takes at most this (each
/// browser has its own 60 s close timeout; they close in parallel).
const BROWSER_SHUTDOWN: Duration = Duration::from_secs(90);

#[tokio::main]
async fn main() -> ExitCode {
    if std::env::args().nth(1).as_deref() == Some("probe") {
        return probe().await;
    }
    if std::env::args().nth(1).as_deref() == Some("profile") {
        return profile_tool();
    }
    if std::env::args().nth(1).as_deref() == Some("self-check") {
        return self_check().await;
    }
    let config = Config::parse();
    let format = match config.log_format {
        LogFormat::Text => lps_telemetry::LogFormat::Text,
        LogFormat::Json => lps_telemetry::LogFormat::Json,
    };
    let telemetry = match lps_telemetry::init("lps-crawler-node", format) {
        Ok(telemetry) => telemetry,
        Err(err) => {
            // NB: no logger yet.
            eprintln!("crawler-node: cannot start telemetry: {err}");
            return ExitCode::from(2);
        }
    };
    let checked = config.validate().and_then(|()| match config.executor {
        ExecutorKind::Browser => config.check_browser_host(),
        ExecutorKind::Scripted => Ok(()),
    });
    if let Err(err) = checked {
        error!(setting = err.setting, error = %err, "invalid configuration");
        telemetry.shutdown();
        return ExitCode::from(2);
    }
    let code = match run(config).await {
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
    };
    telemetry.shutdown();
    code
}

/// `crawler-node probe …`: a profile author's look at one page (`lps_crawler_node::probe`).
async fn probe() -> ExitCode {
    let args = ProbeArgs::parse_from(std::env::args().skip(1));
    // NB: stdout is the report (and `--json` must parse): the probe logs to stderr, at
    // `warn` unless RUST_LOG says otherwise.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
    let mut out = std::io::stdout().lock();
    match lps_crawler_node::probe::run(&args, &mut out).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("crawler-node probe: {err:#}");
            ExitCode::from(2)
        }
    }
}

/// `crawler-node profile check DIR` / `profile convert FILE` (`lps_crawler_node::profile_tool`).
/// Exit code 0 when every profile loads (or the conversion succeeded), 1 when one fails,
/// 2 for a wrong command line or an unreadable directory.
fn profile_tool() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(2).collect();
    let mut out = std::io::stdout().lock();
    let result = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["check", dir] => {
            lps_crawler_node::profile_tool::check(std::path::Path::new(dir), &mut out)
        }
        ["convert", file] => {
            match lps_crawler_node::profile_tool::convert(std::path::Path::new(file), &mut out) {
                Ok(()) => Ok(true),
                Err(err) => {
                    eprintln!("crawler-node profile convert: {err:#}");
                    return ExitCode::FAILURE;
                }
            }
        }
        _ => {
            eprintln!("usage: crawler-node profile check DIR | crawler-node profile convert FILE");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(err) => {
            eprintln!("crawler-node profile check: {err:#}");
            ExitCode::from(2)
        }
    }
}

/// `crawler-node self-check …`: what the node's browser reveals (`lps_crawler_node::selfcheck`).
/// Exit code 0 when nothing leaks, 1 when something does, 2 when the check cannot run.
async fn self_check() -> ExitCode {
    let args = SelfCheckArgs::parse_from(std::env::args().skip(1));
    let mut out = std::io::stdout();
    match selfcheck::run_command(&args, &mut out).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(err) => {
            eprintln!("crawler-node self-check: {err:#}");
            ExitCode::from(2)
        }
    }
}

/// The start-up self-check (see `selfcheck`): the node is not ready until it ran and found
/// nothing leaking (or `LPS_ALLOW_BROWSER_LEAKS`). A check that cannot run is tried again
/// with a growing pause.
async fn startup_self_check(config: Config, executor: BrowserExecutor) {
    let mut pause = Duration::from_secs(5);
    loop {
        let driver = selfcheck::driver_for_config(&config);
        let report = selfcheck::for_config(&config).run(&driver).await;
        driver.stop().await;
        if let Some(display) = driver.display() {
            display.stop().await;
        }
        match report {
            Ok(report) => {
                let leaks = report.leak_count();
                executor
                    .metrics()
                    .browser_leaks
                    .set(i64::try_from(leaks).unwrap_or(i64::MAX));
                if leaks == 0 {
                    info!(
                        mode = config.browser_mode.as_str(),
                        "browser self-check: nothing leaks"
                    );
                    executor.set_identity_checked(true);
                } else {
                    let names: Vec<&str> = report.leaks().map(|i| i.name).collect();
                    if config.allow_browser_leaks {
                        warn!(leaks, items = ?names, "browser self-check: the browser leaks; LPS_ALLOW_BROWSER_LEAKS=true, so the node is ready anyway");
                        executor.set_identity_checked(true);
                    } else {
                        error!(leaks, items = ?names, report = %report.render(), "browser self-check: the browser leaks; the node stays not ready (LPS_ALLOW_BROWSER_LEAKS=true overrides)");
                    }
                }
                return;
            }
            Err(err) => {
                warn!(error = format!("{err:#}"), retry_in = ?pause, "browser self-check could not run");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(300));
            }
        }
    }
}

async fn run(config: Config) -> anyhow::Result<()> {
    let mut browsers = None;
    // One registry for the node and its executor: `/metrics` shows both.
    let metrics = Arc::new(NodeMetrics::new());
    let node = match config.executor {
        ExecutorKind::Scripted => Node::new(config.clone(), ScriptedExecutor::new()),
        ExecutorKind::Browser => {
            let (link, inbox) = NodeLink::channel();
            let mut executor = BrowserExecutor::new(BrowserSettings::from_config(&config))
                .with_events(Arc::new(link.clone()))
                .with_metrics(metrics.clone());
            // NB: validated at start-up already; `llm()` only repeats the check.
            if let Some(settings) = config.llm()? {
                info!(
                    endpoint = %settings.base_url,
                    model = %settings.model,
                    key = settings.api_key.is_some(),
                    timeout = ?settings.timeout,
                    "llm endpoint configured: asked when the rule-based rounds find nothing"
                );
                executor = executor
                    .with_llm(LlmClient::new(settings).context("cannot start the LLM client")?);
            }
            match config.proxy_mode {
                ProxyMode::Coordinator => executor = executor.with_proxies(Arc::new(link)),
                ProxyMode::Direct => {
                    warn!("LPS_PROXY_MODE=direct: browsers go to the malls without a proxy")
                }
            }
            browsers = Some(executor.clone());
            executor.set_identity_checked(false);
            tokio::spawn(
                startup_self_check(config.clone(), executor.clone())
                    .instrument(info_span!(parent: None, "node.self_check")),
            );
            Node::new(config.clone(), executor).with_link(inbox)
        }
    }
    .with_metrics(metrics);
    info!(
        node.id = node.node_id(),
        coordinator = %config.coordinator_url,
        slots = config.slots,
        executor = ?config.executor,
        proxy_mode = ?config.proxy_mode,
        "crawler node starting"
    );
    let listener = tokio::net::TcpListener::bind(config.http_addr)
        .await
        .with_context(|| format!("LPS_HTTP_ADDR: cannot listen on {}", config.http_addr))?;
    let stop_http = CancellationToken::new();
    let mut http = tokio::spawn(
        health::serve(listener, node.handle(), stop_http.clone()).instrument(
            info_span!(parent: None, "node.http", addr = %config.http_addr, log_only = true),
        ),
    );

    let shutdown = CancellationToken::new();
    tokio::spawn(
        watch_signals(shutdown.clone(), browsers.clone())
            .instrument(info_span!(parent: None, "node.signals", log_only = true)),
    );

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
    // NB: after the node: running jobs ended (or were handed back) and IP sessions were
    // released before Goodbye; now no Chromium may outlive the process.
    if let Some(browsers) = browsers
        && tokio::time::timeout(BROWSER_SHUTDOWN, browsers.shutdown())
            .await
            .is_err()
    {
        warn!(timeout = ?BROWSER_SHUTDOWN, "closing the browsers timed out");
    }
    result
}

/// Cancels `shutdown` on the first SIGTERM/SIGINT; exits at once on a second one, killing
/// the browsers first so none outlives the process.
#[cfg(unix)]
async fn watch_signals(shutdown: CancellationToken, browsers: Option<BrowserExecutor>) {
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
            if let Some(browsers) = &browsers {
                browsers.kill_now();
            }
            std::process::exit(130);
        }
    }
}

#[cfg(not(unix))]
async fn watch_signals(shutdown: CancellationToken, _browsers: Option<BrowserExecutor>) {
    if tokio::signal::ctrl_c().await.is_ok() {
        info!("drain requested");
        shutdown.cancel();
    }
}
