//! `lps-test-kit`: run the fixture malls and the fake proxy gateway as processes.
//!
//! Every subcommand prints one JSON line with its addresses to stdout (for scripts), logs
//! to stderr, and runs until SIGINT/SIGTERM.
#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context as _, bail};
use clap::{Parser, Subcommand};
use lps_test_kit::catalog::{Catalog, MallStyle};
use lps_test_kit::gateway::{Gateway, GatewayConfig};
use lps_test_kit::mall::{GAMMA_API_KEY, MallConfig, MallServer};
use lps_test_kit::stack::{Stack, StackConfig};
use serde_json::json;
use tracing_subscriber::EnvFilter;

#[derive(Debug, Parser)]
#[command(
    name = "lps-test-kit",
    version,
    about = "LPS fixture malls and fake proxy gateway"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve one fixture mall.
    Mall(MallArgs),
    /// Serve the fake proxy gateway.
    Gateway(GatewayArgs),
    /// Serve an alpha, a beta and a gamma mall and a gateway allowing them.
    Serve(ServeArgs),
}

#[derive(Debug, clap::Args)]
struct MallArgs {
    /// Markup style: alpha, beta or gamma.
    #[arg(long, env = "LPS_TESTKIT_MALL_STYLE")]
    style: MallStyle,
    /// Listen address.
    #[arg(long, env = "LPS_TESTKIT_MALL_LISTEN", default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Catalog TOML file (default: the builtin catalog).
    #[arg(long, env = "LPS_TESTKIT_CATALOG")]
    catalog: Option<PathBuf>,
    /// Block an exit IP after this many searches.
    #[arg(long, env = "LPS_TESTKIT_BLOCK_AFTER")]
    block_after: Option<u32>,
    /// The key gamma's JSON API requires in X-Gamma-Key.
    #[arg(long, env = "LPS_TESTKIT_GAMMA_API_KEY", default_value = GAMMA_API_KEY)]
    gamma_api_key: String,
}

#[derive(Debug, clap::Args)]
struct CredentialArgs {
    /// Proxy user name (requires --password-file); without it, no authentication.
    #[arg(long, env = "LPS_TESTKIT_GATEWAY_USER")]
    user: Option<String>,
    /// File holding the proxy password (first line).
    #[arg(long, env = "LPS_TESTKIT_GATEWAY_PASSWORD_FILE")]
    password_file: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
struct GatewayArgs {
    /// Loopback IP and base port; port 0 = K free ports.
    #[arg(
        long,
        env = "LPS_TESTKIT_GATEWAY_LISTEN_BASE",
        default_value = "127.0.0.1:0"
    )]
    listen_base: SocketAddr,
    /// Number of ports (exit IPs).
    #[arg(long, env = "LPS_TESTKIT_GATEWAY_PORTS", default_value_t = 8)]
    ports: usize,
    #[command(flatten)]
    credentials: CredentialArgs,
    /// Allowed target host:port (loopback only); repeatable.
    #[arg(long, env = "LPS_TESTKIT_GATEWAY_ALLOW", num_args = 1.., value_delimiter = ',', required = true)]
    allow: Vec<String>,
}

#[derive(Debug, clap::Args)]
struct ServeArgs {
    /// Listen address of the alpha mall.
    #[arg(long, env = "LPS_TESTKIT_ALPHA_LISTEN", default_value = "127.0.0.1:0")]
    alpha_listen: SocketAddr,
    /// Listen address of the beta mall.
    #[arg(long, env = "LPS_TESTKIT_BETA_LISTEN", default_value = "127.0.0.1:0")]
    beta_listen: SocketAddr,
    /// Listen address of the gamma mall (the demo uses 127.0.0.1:18083).
    #[arg(long, env = "LPS_TESTKIT_GAMMA_LISTEN", default_value = "127.0.0.1:0")]
    gamma_listen: SocketAddr,
    /// The key gamma's JSON API requires in X-Gamma-Key.
    #[arg(long, env = "LPS_TESTKIT_GAMMA_API_KEY", default_value = GAMMA_API_KEY)]
    gamma_api_key: String,
    /// Gateway loopback IP and base port; port 0 = free ports.
    #[arg(
        long,
        env = "LPS_TESTKIT_GATEWAY_LISTEN_BASE",
        default_value = "127.0.0.1:0"
    )]
    gateway_listen_base: SocketAddr,
    /// Number of gateway ports (exit IPs).
    #[arg(long, env = "LPS_TESTKIT_GATEWAY_PORTS", default_value_t = 8)]
    ports: usize,
    #[command(flatten)]
    credentials: CredentialArgs,
    /// Catalog TOML file (default: the builtin catalog).
    #[arg(long, env = "LPS_TESTKIT_CATALOG")]
    catalog: Option<PathBuf>,
    /// Block an exit IP after this many searches (every mall).
    #[arg(long, env = "LPS_TESTKIT_BLOCK_AFTER")]
    block_after: Option<u32>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    init_tracing();
    match Cli::parse().command {
        Command::Mall(args) => run_mall(args).await,
        Command::Gateway(args) => run_gateway(args).await,
        Command::Serve(args) => run_serve(args).await,
    }
}

fn init_tracing() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .init();
}

async fn run_mall(args: MallArgs) -> anyhow::Result<()> {
    let config = MallConfig::new(args.style)
        .with_listen(args.listen)
        .with_catalog(load_catalog(args.catalog.as_deref())?)
        .with_block_after(args.block_after)
        .with_api_key(args.gamma_api_key);
    let mall = MallServer::start(config).await?;
    print_json_line(&json!({ "style": mall.style(), "url": mall.base_url() }))?;
    wait_for_stop_signal().await?;
    mall.shutdown().await?;
    Ok(())
}

async fn run_gateway(args: GatewayArgs) -> anyhow::Result<()> {
    let mut config = GatewayConfig::new(args.ports).with_listen_base(args.listen_base);
    config = with_credentials(config, &args.credentials)?;
    config.allowed = args.allow;
    let gateway = Gateway::start(config).await?;
    let ports: Vec<_> = gateway
        .ports()
        .into_iter()
        .map(|p| json!({ "label": p.label, "addr": p.addr, "proxy_url": p.proxy_url() }))
        .collect();
    print_json_line(&json!({ "gateway": ports }))?;
    wait_for_stop_signal().await?;
    gateway.shutdown().await;
    Ok(())
}

async fn run_serve(args: ServeArgs) -> anyhow::Result<()> {
    let gateway = GatewayConfig::new(args.ports).with_listen_base(args.gateway_listen_base);
    let config = StackConfig {
        catalog: load_catalog(args.catalog.as_deref())?,
        alpha_listen: args.alpha_listen,
        beta_listen: args.beta_listen,
        gamma_listen: args.gamma_listen,
        gamma_api_key: args.gamma_api_key,
        block_after: args.block_after,
        gateway: with_credentials(gateway, &args.credentials)?,
    };
    let stack = Stack::start(config).await?;
    print_json_line(&serde_json::to_value(stack.addresses())?)?;
    wait_for_stop_signal().await?;
    stack.shutdown().await?;
    Ok(())
}

fn load_catalog(path: Option<&Path>) -> anyhow::Result<Arc<Catalog>> {
    let catalog = match path {
        Some(path) => Catalog::load(path)?,
        None => Catalog::builtin(),
    };
    Ok(Arc::new(catalog))
}

fn with_credentials(config: GatewayConfig, args: &CredentialArgs) -> anyhow::Result<GatewayConfig> {
    match (&args.user, &args.password_file) {
        (None, None) => Ok(config),
        (Some(user), Some(file)) => {
            let text = std::fs::read_to_string(file)
                .with_context(|| format!("cannot read password file {}", file.display()))?;
            let password = text.lines().next().unwrap_or_default().trim().to_owned();
            Ok(config.with_credentials(user.clone(), password))
        }
        _ => bail!("--user and --password-file go together"),
    }
}

/// Writes the JSON line that is this binary's interface to scripts (`writeln!` rather than
/// `println!`: a closed stdout is an error to report, not a panic).
fn print_json_line(value: &serde_json::Value) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{value}")?;
    stdout.flush()?;
    Ok(())
}

async fn wait_for_stop_signal() -> anyhow::Result<()> {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("cannot install SIGTERM handler")?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r.context("cannot listen for SIGINT")?,
        _ = terminate.recv() => {}
    }
    tracing::info!("stop signal received, shutting down");
    Ok(())
}
