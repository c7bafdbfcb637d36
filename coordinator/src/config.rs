//! Coordinator configuration: clap flags, each with an `LPS_…` environment variable
//! (secrets only from the environment), turned into a validated [`Config`] that fails fast
//! naming the bad setting. Durations are written `30s`, `5m`.

use std::{net::SocketAddr, time::Duration};

use clap::{Args, Parser, Subcommand};

pub use crate::settings::{ConfigError, default_duration};
use crate::{
    alerts::{
        DEFAULT_ALERT_BLOCK_SESSIONS_6H, DEFAULT_ALERT_BLOCKS_1H, DEFAULT_ALERT_COST_1H_USD,
        DEFAULT_ALERT_DEAD_1H, DEFAULT_ALERT_DEADLINE_KILLS_1H, DEFAULT_ALERT_DELIVERIES_DEAD,
        DEFAULT_ALERT_OLDEST_QUEUED, DEFAULT_ALERT_PORTS_AVAILABLE_PCT, DEFAULT_ALERT_STUCK,
    },
    auth::{Token, Tokens},
    queue::{
        self, DEFAULT_BACKOFF_BASE, DEFAULT_BACKOFF_CAP, DEFAULT_JOB_DEADLINE, DEFAULT_LEASE_TTL,
        DEFAULT_MAX_ATTEMPTS,
    },
    settings::duration,
};

#[derive(Debug, Parser)]
#[command(
    name = "coordinator",
    version,
    about = "LPS coordinator: job queue, proxy ledger and gRPC services"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub serve: ServeArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the services (the default).
    Serve,
    /// Apply the database migrations (under an advisory lock) and exit.
    Migrate,
}

// Every setting's default, once: the flags below read these, and so do the library
// defaults that tests and benchmarks start from. The queue's and the alerts' own are in
// their modules (`queue::DEFAULT_*`, `alerts::DEFAULT_ALERT_*`, read by
// `QueueConfig::default` and `alerts::Thresholds::default`); [`default_duration`] reads a
// duration default.
pub const DEFAULT_DB_MAX_CONNECTIONS: u32 = 20;
pub const DEFAULT_GRPC_ADDR: &str = "0.0.0.0:50051";
pub const DEFAULT_HTTP_ADDR: &str = "0.0.0.0:8080";
pub const DEFAULT_HEARTBEAT_INTERVAL: &str = "5s";
pub const DEFAULT_NODE_GRACE: &str = "15s";
pub const DEFAULT_REAP_INTERVAL: &str = "1s";
pub const DEFAULT_CLAIM_POLL: &str = "10s";
pub const DEFAULT_SHUTDOWN_TIMEOUT: &str = "30s";
pub const DEFAULT_LOG_FORMAT: &str = "text";
pub const DEFAULT_ALERT_INTERVAL: &str = "15s";
pub const DEFAULT_ALERT_FOR: &str = "30s";
pub const DEFAULT_ALERT_RESOLVE_AFTER: &str = "2m";
pub const DEFAULT_DEPLOYMENT: &str = "lps";
pub use crate::queue::DEFAULT_PROXY_USD_PER_GB;

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// PostgreSQL URL.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
    #[arg(long, env = "LPS_DB_MAX_CONNECTIONS", default_value_t = DEFAULT_DB_MAX_CONNECTIONS)]
    pub db_max_connections: u32,
    /// gRPC listen address (SearchService, NodeService, OpsService, health, reflection).
    #[arg(long, env = "LPS_GRPC_ADDR", default_value = DEFAULT_GRPC_ADDR)]
    pub grpc_addr: SocketAddr,
    /// HTTP listen address (/healthz, /readyz).
    #[arg(long, env = "LPS_HTTP_ADDR", default_value = DEFAULT_HTTP_ADDR)]
    pub http_addr: SocketAddr,
    /// PEM certificate chain the gRPC port presents: TLS on that port. Needs LPS_TLS_KEY.
    #[arg(long, env = "LPS_TLS_CERT")]
    pub tls_cert: Option<std::path::PathBuf>,
    /// PEM private key of LPS_TLS_CERT.
    #[arg(long, env = "LPS_TLS_KEY")]
    pub tls_key: Option<std::path::PathBuf>,
    /// PEM CA bundle that node client certificates must chain to: NodeService.Connect
    /// then needs a client certificate (mTLS) besides the node token. Other callers may
    /// connect without one. Needs LPS_TLS_CERT.
    #[arg(long, env = "LPS_TLS_CLIENT_CA")]
    pub tls_client_ca: Option<std::path::PathBuf>,
    /// Serve the HTTP port over TLS too, with LPS_TLS_CERT (no client certificates).
    /// Off by default: kubelet probes and Prometheus scrape it in plaintext.
    #[arg(long, env = "LPS_HTTP_TLS", default_value_t = false, action = clap::ArgAction::Set)]
    pub http_tls: bool,
    /// Comma-separated bearer tokens of SearchService/OpsService callers, each `NAME=TOKEN`
    /// (NAME: 1-64 letters, digits, '.', '_', '-'; the client's name on its searches; its
    /// idempotency keys are its own) or a bare TOKEN (named `client-` + a fingerprint).
    #[arg(
        long,
        env = "LPS_CLIENT_TOKENS",
        hide_env_values = true,
        value_delimiter = ','
    )]
    pub client_tokens: Vec<String>,
    /// Comma-separated bearer tokens of operators (OpsService writes; see every client's
    /// searches), `NAME=TOKEN` or a bare TOKEN like LPS_CLIENT_TOKENS.
    #[arg(
        long,
        env = "LPS_ADMIN_TOKENS",
        hide_env_values = true,
        value_delimiter = ','
    )]
    pub admin_tokens: Vec<String>,
    /// Comma-separated bearer tokens of crawler nodes.
    #[arg(
        long,
        env = "LPS_NODE_TOKENS",
        hide_env_values = true,
        value_delimiter = ','
    )]
    pub node_tokens: Vec<String>,
    /// Limits node tokens to node ids: comma-separated `N=ID|ID…`, N the 1-based place of
    /// the token in LPS_NODE_TOKENS, an ID a node id or a prefix ending in `*`
    /// (`1=crawler-node-*`). A token without an entry may use any node id.
    #[arg(long, env = "LPS_NODE_TOKEN_NODES", value_delimiter = ',')]
    pub node_token_nodes: Vec<String>,
    /// Per-client call rates on SearchService: comma-separated `NAME=N/s` (or `N/min`,
    /// `N/h`), NAME a client or admin name or `*` for every caller without its own entry.
    /// Over it: RESOURCE_EXHAUSTED with a RetryInfo. Default: none.
    #[arg(long, env = "LPS_CLIENT_RATE_LIMITS", value_delimiter = ',')]
    pub client_rate_limits: Vec<String>,
    /// Per-client SearchService calls in progress at once (a WatchSearch counts while it
    /// streams): comma-separated `NAME=N`, NAME as in LPS_CLIENT_RATE_LIMITS. Default: none.
    #[arg(long, env = "LPS_CLIENT_CONCURRENCY_LIMITS", value_delimiter = ',')]
    pub client_concurrency_limits: Vec<String>,
    /// Names this replica in node_session (default: hostname-pid).
    #[arg(long, env = "LPS_COORDINATOR_ID")]
    pub coordinator_id: Option<String>,
    /// The revision of this replica's configuration (the Helm chart sets the release
    /// revision). The mall settings and proxy ports are shared by every replica: one starts
    /// by writing its own only when no replica of a newer revision wrote theirs, so an old
    /// replica restarting during a rolling update does not undo the new settings.
    #[arg(long, env = "LPS_CONFIG_REVISION", default_value_t = 0)]
    pub config_revision: u32,
    #[arg(long, env = "LPS_HEARTBEAT_INTERVAL", default_value = DEFAULT_HEARTBEAT_INTERVAL, value_parser = duration)]
    pub heartbeat_interval: Duration,
    /// How long a job's lease lasts without a renewal. Must cover a silent node's whole way
    /// out — the last renewal up to a heartbeat before its last frame, the silence timeout
    /// (three heartbeats), LPS_NODE_GRACE, a reaper pass and a heartbeat to spare — so a
    /// node that goes silent always has its jobs reclaimed (no attempt charged), never
    /// reaped: `LPS_LEASE_TTL >= 5 × LPS_HEARTBEAT_INTERVAL + LPS_NODE_GRACE +
    /// LPS_REAP_INTERVAL`.
    #[arg(long, env = "LPS_LEASE_TTL", default_value = DEFAULT_LEASE_TTL, value_parser = duration)]
    pub lease_ttl: Duration,
    /// How long a lost node's jobs wait for it to reconnect.
    #[arg(long, env = "LPS_NODE_GRACE", default_value = DEFAULT_NODE_GRACE, value_parser = duration)]
    pub node_grace: Duration,
    /// A node that drops its jobs this many times within LPS_NODE_QUARANTINE_WINDOW (its
    /// stream lost and the jobs reclaimed after the grace, or a Hello that no longer lists
    /// them) is quarantined: no new assignments for LPS_NODE_QUARANTINE. 0: never.
    #[arg(long, env = "LPS_NODE_QUARANTINE_DROPS", default_value_t = 3)]
    pub node_quarantine_drops: u32,
    /// The window LPS_NODE_QUARANTINE_DROPS are counted in.
    #[arg(long, env = "LPS_NODE_QUARANTINE_WINDOW", default_value = "10m", value_parser = duration)]
    pub node_quarantine_window: Duration,
    /// How long a first quarantine lasts; each later one (without a clean window between)
    /// doubles it, at most 16 times.
    #[arg(long, env = "LPS_NODE_QUARANTINE", default_value = "5m", value_parser = duration)]
    pub node_quarantine: Duration,
    /// Hard limit for one run of a job.
    #[arg(long, env = "LPS_JOB_DEADLINE", default_value = DEFAULT_JOB_DEADLINE, value_parser = duration)]
    pub job_deadline: Duration,
    #[arg(long, env = "LPS_MAX_ATTEMPTS", default_value_t = DEFAULT_MAX_ATTEMPTS)]
    pub max_attempts: u16,
    #[arg(long, env = "LPS_BACKOFF_BASE", default_value = DEFAULT_BACKOFF_BASE, value_parser = duration)]
    pub backoff_base: Duration,
    #[arg(long, env = "LPS_BACKOFF_CAP", default_value = DEFAULT_BACKOFF_CAP, value_parser = duration)]
    pub backoff_cap: Duration,
    /// How long a "not found" the mall said (its no-results page, no card) answers later
    /// requests for the product and mall from the negative cache (0: not remembered).
    #[arg(long, env = "LPS_NEGATIVE_TTL_NO_RESULTS", default_value = queue::DEFAULT_NEGATIVE_TTL_NO_RESULTS, value_parser = duration)]
    pub negative_ttl_no_results: Duration,
    /// How long a "not found" the judge decided (cards read, none accepted) is
    /// remembered; at most LPS_NEGATIVE_TTL_NO_RESULTS (0: not remembered).
    #[arg(long, env = "LPS_NEGATIVE_TTL_JUDGED", default_value = queue::DEFAULT_NEGATIVE_TTL_JUDGED, value_parser = duration)]
    pub negative_ttl_judged: Duration,
    #[arg(long, env = "LPS_REAP_INTERVAL", default_value = DEFAULT_REAP_INTERVAL, value_parser = duration)]
    pub reap_interval: Duration,
    /// Claim poll when no NOTIFY arrives (jittered). NOTIFY brings new work at once; the
    /// poll only catches jobs that become due by time (backoff, start gaps) and lost
    /// notifications. Each idle node stream polls once per interval: lowering it costs
    /// one claim query per node per interval.
    #[arg(long, env = "LPS_CLAIM_POLL", default_value = DEFAULT_CLAIM_POLL, value_parser = duration)]
    pub claim_poll: Duration,
    /// How long shutdown may take in all (node streams are told to reconnect at its start).
    #[arg(long, env = "LPS_SHUTDOWN_TIMEOUT", default_value = DEFAULT_SHUTDOWN_TIMEOUT, value_parser = duration)]
    pub shutdown_timeout: Duration,
    /// `text` or `json`.
    #[arg(long, env = "LPS_LOG_FORMAT", default_value = DEFAULT_LOG_FORMAT)]
    pub log_format: String,
    /// Directory of site-profile TOML files overriding or adding to the built-in ones.
    /// Watched while the coordinator runs: an edit that validates reaches the connected
    /// nodes without a restart, an invalid one is refused and the loaded set kept.
    #[arg(long, env = "LPS_PROFILES_DIR")]
    pub profiles_dir: Option<std::path::PathBuf>,
    /// How often the profile directory is read for edits (a mounted ConfigMap changes in
    /// place by swapping a symbolic link, which file notifications miss).
    #[arg(long, env = "LPS_PROFILES_POLL", default_value = crate::profiles::watch::DEFAULT_PROFILES_POLL, value_parser = duration)]
    pub profiles_poll: Duration,
    /// Vocabulary file (TOML, docs/vocabulary.md) replacing the built-in word lists of the
    /// same-product judge; sent to nodes in Welcome. Default: the built-in vocabulary.
    #[arg(long, env = "LPS_VOCABULARY_FILE")]
    pub vocabulary_file: Option<std::path::PathBuf>,
    /// Slack-compatible incoming webhook for alerts (secret). Announcements go through the
    /// delivery outbox: retried with LPS_DELIVERY_BACKOFF_*, dead after
    /// LPS_DELIVERY_MAX_ATTEMPTS, listed by `lpsctl deliveries`.
    #[arg(long, env = "LPS_ALERT_WEBHOOK_URL", hide_env_values = true)]
    pub alert_webhook_url: Option<String>,
    /// Signing secret of the alert webhook's posts (LPS-Signature, as for destinations; at
    /// least 16 bytes). Unset: the posts are unsigned.
    #[arg(long, env = "LPS_ALERT_WEBHOOK_SECRET", hide_env_values = true)]
    pub alert_webhook_secret: Option<String>,
    /// How often metrics are refreshed and alert rules evaluated.
    #[arg(long, env = "LPS_ALERT_INTERVAL", default_value = DEFAULT_ALERT_INTERVAL, value_parser = duration)]
    pub alert_interval: Duration,
    /// How long an alert rule's condition must hold before it fires (0s: at once).
    #[arg(long, env = "LPS_ALERT_FOR", default_value = DEFAULT_ALERT_FOR, value_parser = duration)]
    pub alert_for: Duration,
    /// How long a firing rule's condition must be gone before it resolves; also an event
    /// rule's quiet period (`block_ended_sessions_6h`).
    #[arg(long, env = "LPS_ALERT_RESOLVE_AFTER", default_value = DEFAULT_ALERT_RESOLVE_AFTER, value_parser = duration)]
    pub alert_resolve_after: Duration,
    /// Names this deployment in alert messages (the Helm chart sets the release name).
    #[arg(long, env = "LPS_DEPLOYMENT", default_value = DEFAULT_DEPLOYMENT)]
    pub deployment: String,
    #[arg(long, env = "LPS_ALERT_DEAD_1H", default_value_t = DEFAULT_ALERT_DEAD_1H)]
    pub alert_dead_1h: f64,
    #[arg(long, env = "LPS_ALERT_BLOCKS_1H", default_value_t = DEFAULT_ALERT_BLOCKS_1H)]
    pub alert_blocks_1h: f64,
    #[arg(long, env = "LPS_ALERT_OLDEST_QUEUED", default_value = DEFAULT_ALERT_OLDEST_QUEUED, value_parser = duration)]
    pub alert_oldest_queued: Duration,
    #[arg(long, env = "LPS_ALERT_STUCK", default_value_t = DEFAULT_ALERT_STUCK)]
    pub alert_stuck: f64,
    #[arg(long, env = "LPS_ALERT_DEADLINE_KILLS_1H", default_value_t = DEFAULT_ALERT_DEADLINE_KILLS_1H)]
    pub alert_deadline_kills_1h: f64,
    #[arg(long, env = "LPS_ALERT_COST_1H_USD", default_value_t = DEFAULT_ALERT_COST_1H_USD)]
    pub alert_cost_1h_usd: f64,
    /// Fires when available proxy ports fall to this percentage or below.
    #[arg(long, env = "LPS_ALERT_PORTS_AVAILABLE_PCT", default_value_t = DEFAULT_ALERT_PORTS_AVAILABLE_PCT)]
    pub alert_ports_available_pct: f64,
    #[arg(long, env = "LPS_ALERT_BLOCK_SESSIONS_6H", default_value_t = DEFAULT_ALERT_BLOCK_SESSIONS_6H)]
    pub alert_block_sessions_6h: f64,
    /// `deliveries_dead` fires when this many delivery events are dead (every attempt
    /// failed; `lpsctl deliveries --dead`).
    #[arg(long, env = "LPS_ALERT_DELIVERIES_DEAD", default_value_t = DEFAULT_ALERT_DELIVERIES_DEAD)]
    pub alert_deliveries_dead: f64,
    /// `layout_changed` fires when a mall's share of layout failures (no card source read
    /// a healthy page) among its attempts of the last 15 minutes is above this (0..=1).
    #[arg(long, env = "LPS_ALERT_LAYOUT_SHARE", default_value_t = crate::alerts::DEFAULT_LAYOUT_SHARE)]
    pub alert_layout_share: f64,
    /// ... for malls with at least this many finished attempts in those 15 minutes (so one
    /// failure does not page anyone).
    #[arg(long, env = "LPS_ALERT_LAYOUT_MIN_ATTEMPTS", default_value_t = crate::alerts::DEFAULT_LAYOUT_MIN_ATTEMPTS)]
    pub alert_layout_min_attempts: u32,
    /// USD per GB of proxy traffic, for each job's cost figure (sent to nodes).
    #[arg(long, env = "LPS_PROXY_USD_PER_GB", default_value_t = DEFAULT_PROXY_USD_PER_GB)]
    pub proxy_usd_per_gb: f64,
    /// Deployment-wide cap on what attempts may cost per rolling hour, USD (unset: no cap).
    /// Once the last hour's spend reaches it no job is claimed — queued jobs wait, nothing
    /// fails — until spend falls out of the hour; runs already going finish. A mall's own cap
    /// is its site profile's `[limits] spend_cap_hourly_usd`. Give every replica the same.
    #[arg(long, env = "LPS_SPEND_CAP_HOURLY_USD")]
    pub spend_cap_hourly_usd: Option<f64>,
    #[command(flatten)]
    pub ledger: crate::ledger::LedgerArgs,
    #[command(flatten)]
    pub retention: crate::retention::RetentionArgs,
    #[command(flatten)]
    pub delivery: crate::delivery::DeliveryArgs,
    #[command(flatten)]
    pub schedule: crate::schedule::ScheduleArgs,
    /// Comma-separated ids of the malls searches may use (the others stay disabled).
    #[arg(
        long,
        env = "LPS_MALLS",
        value_delimiter = ',',
        default_value = "naver,coupang"
    )]
    pub malls: Vec<String>,
}

/// A validated configuration. `Debug` leaves out the secrets.
#[derive(Clone)]
pub struct Config {
    pub database_url: String,
    pub db_max_connections: u32,
    pub grpc_addr: SocketAddr,
    pub http_addr: SocketAddr,
    /// TLS on the gRPC port; `None`: plaintext.
    pub tls: Option<crate::tls::ServerTls>,
    /// TLS on the HTTP port as well (only with `tls`).
    pub http_tls: bool,
    pub tokens: Tokens,
    pub client_limits: crate::grpc::limits::LimitConfig,
    pub coordinator_id: String,
    pub config_revision: u32,
    pub heartbeat_interval: Duration,
    pub lease_ttl: Duration,
    pub node_grace: Duration,
    pub node_quarantine: crate::node_session::QuarantinePolicy,
    pub job_deadline: Duration,
    pub max_attempts: u16,
    pub backoff_base: Duration,
    pub backoff_cap: Duration,
    pub negative_ttl_no_results: Duration,
    pub negative_ttl_judged: Duration,
    pub reap_interval: Duration,
    pub claim_poll: Duration,
    pub shutdown_timeout: Duration,
    pub json_logs: bool,
    pub profiles_dir: Option<std::path::PathBuf>,
    pub profiles_poll: Duration,
    /// Replaces the built-in vocabulary (`None`: built-in); read and checked at start-up.
    pub vocabulary_file: Option<std::path::PathBuf>,
    pub malls: Vec<lps_proto::model::MallId>,
    pub alerts: crate::alerts::AlertConfig,
    pub proxy_usd_per_gb: f64,
    /// `LPS_SPEND_CAP_HOURLY_USD`: `None`, or a positive number of USD per rolling hour.
    pub spend_cap_hourly_usd: Option<f64>,
    /// The proxy ledger; `None` when no gateway is configured (nodes then get no IPs).
    pub ledger: Option<crate::ledger::LedgerConfig>,
    /// What the retention sweeps delete (no rules: nothing).
    pub retention: crate::retention::RetentionConfig,
    /// Delivery destinations and the delivery worker's settings.
    pub delivery: crate::delivery::DeliveryConfig,
    /// The scheduler's settings.
    pub schedule: crate::schedule::ScheduleConfig,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("database_url", &"***")
            .field("grpc_addr", &self.grpc_addr)
            .field("http_addr", &self.http_addr)
            .field("tls", &self.tls)
            .field("http_tls", &self.http_tls)
            .field("coordinator_id", &self.coordinator_id)
            .field("config_revision", &self.config_revision)
            .field("heartbeat_interval", &self.heartbeat_interval)
            .field("lease_ttl", &self.lease_ttl)
            .field("node_grace", &self.node_grace)
            .field("node_quarantine", &self.node_quarantine)
            .field("job_deadline", &self.job_deadline)
            .field("profiles_dir", &self.profiles_dir)
            .field("profiles_poll", &self.profiles_poll)
            .field("vocabulary_file", &self.vocabulary_file)
            .field("malls", &self.malls)
            .field("alerts", &self.alerts)
            .field("ledger", &self.ledger)
            .field("delivery", &self.delivery)
            .field("schedule", &self.schedule)
            .finish_non_exhaustive()
    }
}

/// The smallest pool that works: two connections are held by the LISTEN loops, the rest
/// serve requests, node streams, the reaper and alerts.
pub const MIN_DB_CONNECTIONS: u32 = 4;

/// The shortest lease TTL under which a node that goes silent has its jobs reclaimed (not
/// charged) before their leases run out: its last renewal can be a heartbeat before its last
/// frame; the stream is given up after the silence timeout (three heartbeats), the jobs wait
/// the grace period and then one reaper pass; one heartbeat is kept to spare.
pub fn silent_node_window(
    heartbeat: Duration,
    grace: Duration,
    reap_interval: Duration,
) -> Duration {
    heartbeat * 5 + grace + reap_interval
}

fn bad(setting: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError::new(setting, reason)
}

/// `LPS_NODE_TOKEN_NODES` for `count` node tokens (format on the setting).
fn node_token_nodes(raw: &[String], count: usize) -> Result<Vec<Option<Vec<String>>>, ConfigError> {
    const SETTING: &str = "LPS_NODE_TOKEN_NODES";
    let mut out: Vec<Option<Vec<String>>> = vec![None; count];
    for entry in raw.iter().map(|e| e.trim()).filter(|e| !e.is_empty()) {
        let Some((n, ids)) = entry.split_once('=') else {
            return Err(bad(SETTING, format!("{entry:?}: expected N=ID|ID…")));
        };
        let place: usize = n
            .trim()
            .parse()
            .ok()
            .filter(|p| (1..=count).contains(p))
            .ok_or_else(|| {
                bad(
                    SETTING,
                    format!("{entry:?}: {n:?} is not the place (1..={count}) of a node token"),
                )
            })?;
        let ids: Vec<String> = ids
            .split('|')
            .map(|i| i.trim().to_owned())
            .filter(|i| !i.is_empty())
            .collect();
        let valid = |id: &str| {
            let id = id.strip_suffix('*').unwrap_or(id);
            !id.is_empty()
                && id
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        };
        if ids.is_empty() || !ids.iter().all(|i| valid(i)) {
            return Err(bad(
                SETTING,
                format!(
                    "{entry:?}: node ids are letters, digits, '.', '_', '-', a prefix may end in '*'"
                ),
            ));
        }
        out[place - 1] = Some(ids);
    }
    Ok(out)
}

/// Client or admin tokens: `NAME=TOKEN` where the part before the first `=` is a valid
/// name and the rest a token, else the whole entry is a token (base64 padding stays part
/// of a bare token).
fn named_tokens(setting: &'static str, raw: &[String]) -> Result<Vec<Token>, ConfigError> {
    let mut names = std::collections::HashSet::new();
    raw.iter()
        .map(|t| t.trim())
        .filter(|t| !t.is_empty())
        .map(|entry| {
            let token = match entry.split_once('=') {
                Some((name, secret))
                    if crate::auth::valid_name(name) && secret.trim().len() >= 16 =>
                {
                    Token::named(name, secret.trim())
                }
                _ if entry.len() >= 16 => Token::new(entry),
                _ => return Err(bad(setting, "every token must be at least 16 characters")),
            };
            let name = token.name(if setting == "LPS_ADMIN_TOKENS" {
                "admin"
            } else {
                "client"
            });
            if !names.insert(name.clone()) {
                return Err(bad(
                    setting,
                    format!("the name {name:?} is given to two tokens"),
                ));
            }
            Ok(token)
        })
        .collect()
}

/// `LPS_CLIENT_RATE_LIMITS` and `LPS_CLIENT_CONCURRENCY_LIMITS` (formats on the settings),
/// every name one of `tokens`' or `*`.
fn client_limits(
    rates: &[String],
    concurrency: &[String],
    tokens: &Tokens,
) -> Result<crate::grpc::limits::LimitConfig, ConfigError> {
    use crate::grpc::limits::{ANY_CLIENT, LimitConfig, Rate};
    let known: std::collections::HashSet<String> = tokens
        .client
        .iter()
        .map(|t| t.name("client").to_string())
        .chain(tokens.admin.iter().map(|t| t.name("admin").to_string()))
        .collect();
    let mut config = LimitConfig::default();
    let entries =
        |setting: &'static str, raw: &[String]| -> Result<Vec<(String, String)>, ConfigError> {
            raw.iter()
                .map(|e| e.trim())
                .filter(|e| !e.is_empty())
                .map(|e| {
                    let (name, value) = e
                        .split_once('=')
                        .ok_or_else(|| bad(setting, format!("{e:?}: expected NAME=VALUE")))?;
                    let name = name.trim();
                    if name != ANY_CLIENT && !known.contains(name) {
                        return Err(bad(
                            setting,
                            format!("{e:?}: {name:?} is not the name of a client or admin token"),
                        ));
                    }
                    Ok((name.to_owned(), value.trim().to_owned()))
                })
                .collect()
        };
    const RATES: &str = "LPS_CLIENT_RATE_LIMITS";
    for (name, value) in entries(RATES, rates)? {
        let rate = Rate::parse(&value).ok_or_else(|| {
            bad(
                RATES,
                format!("{name}={value}: expected N/s, N/min or N/h with N >= 1"),
            )
        })?;
        config.by_client.entry(name).or_default().rate = Some(rate);
    }
    const CONCURRENCY: &str = "LPS_CLIENT_CONCURRENCY_LIMITS";
    for (name, value) in entries(CONCURRENCY, concurrency)? {
        let n = value
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=100_000).contains(n))
            .ok_or_else(|| {
                bad(
                    CONCURRENCY,
                    format!("{name}={value}: expected 1..=100000 calls"),
                )
            })?;
        config.by_client.entry(name).or_default().concurrent = Some(n);
    }
    Ok(config)
}

fn tokens(setting: &'static str, raw: &[String]) -> Result<Vec<Token>, ConfigError> {
    raw.iter()
        .map(|t| t.trim())
        .filter(|t| !t.is_empty())
        .map(|t| {
            if t.len() < 16 {
                Err(bad(setting, "every token must be at least 16 characters"))
            } else {
                Ok(Token::new(t))
            }
        })
        .collect()
}

/// What `coordinator migrate` needs, validated alone: the Helm chart's migrations Job
/// gives it `DATABASE_URL` and the log settings only (no tokens, malls or proxy settings).
#[derive(Clone)]
pub struct MigrateConfig {
    pub database_url: String,
    pub json_logs: bool,
}

impl std::fmt::Debug for MigrateConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MigrateConfig")
            .field("database_url", &"***")
            .field("json_logs", &self.json_logs)
            .finish()
    }
}

fn database_url(url: Option<String>) -> Result<String, ConfigError> {
    url.filter(|u| !u.is_empty())
        .ok_or_else(|| bad("DATABASE_URL", "is required"))
}

fn json_logs(format: &str) -> Result<bool, ConfigError> {
    match format {
        "text" => Ok(false),
        "json" => Ok(true),
        _ => Err(bad("LPS_LOG_FORMAT", "must be text or json")),
    }
}

impl ServeArgs {
    /// The settings of `coordinator migrate`; the serve settings are not looked at.
    pub fn validate_migrate(self) -> Result<MigrateConfig, ConfigError> {
        Ok(MigrateConfig {
            json_logs: json_logs(&self.log_format)?,
            database_url: database_url(self.database_url)?,
        })
    }

    pub fn validate(self) -> Result<Config, ConfigError> {
        let database_url = database_url(self.database_url)?;
        let tokens = Tokens {
            client: named_tokens("LPS_CLIENT_TOKENS", &self.client_tokens)?,
            admin: named_tokens("LPS_ADMIN_TOKENS", &self.admin_tokens)?,
            node: tokens("LPS_NODE_TOKENS", &self.node_tokens)?,
            node_ids: Vec::new(),
        };
        let node_ids = node_token_nodes(&self.node_token_nodes, tokens.node.len())?;
        let tokens = Tokens { node_ids, ..tokens };
        if tokens.client.is_empty() && tokens.admin.is_empty() {
            return Err(bad(
                "LPS_CLIENT_TOKENS",
                "at least one client or admin token is required",
            ));
        }
        if tokens.node.is_empty() {
            return Err(bad(
                "LPS_NODE_TOKENS",
                "at least one node token is required",
            ));
        }
        if let Some(name) = tokens
            .client
            .iter()
            .map(|t| t.name("client"))
            .find(|c| tokens.admin.iter().any(|a| a.name("admin") == *c))
        {
            return Err(bad(
                "LPS_ADMIN_TOKENS",
                format!("the name {name:?} is also a client token's (LPS_CLIENT_TOKENS)"),
            ));
        }
        let client_limits = client_limits(
            &self.client_rate_limits,
            &self.client_concurrency_limits,
            &tokens,
        )?;
        if !(MIN_DB_CONNECTIONS..=500).contains(&self.db_max_connections) {
            return Err(bad(
                "LPS_DB_MAX_CONNECTIONS",
                format!(
                    "must be {MIN_DB_CONNECTIONS}..=500: two connections stay held by LISTEN (job and search wake-ups), and requests, nodes, the reaper and the alert loop need the rest"
                ),
            ));
        }
        if self.heartbeat_interval < Duration::from_millis(50)
            || self.heartbeat_interval > Duration::from_secs(60)
        {
            return Err(bad("LPS_HEARTBEAT_INTERVAL", "must be 50ms..=60s"));
        }
        for (setting, value) in [
            ("LPS_REAP_INTERVAL", self.reap_interval),
            ("LPS_CLAIM_POLL", self.claim_poll),
            ("LPS_PROFILES_POLL", self.profiles_poll),
            ("LPS_SHUTDOWN_TIMEOUT", self.shutdown_timeout),
        ] {
            if value.is_zero() {
                return Err(bad(setting, "must be positive"));
            }
        }
        let silent_node =
            silent_node_window(self.heartbeat_interval, self.node_grace, self.reap_interval);
        if self.lease_ttl < silent_node {
            return Err(bad(
                "LPS_LEASE_TTL",
                format!(
                    "{} is too short: a silent node's jobs must be reclaimed before their leases run out, so it must be at least 5 × LPS_HEARTBEAT_INTERVAL ({}) + LPS_NODE_GRACE ({}) + LPS_REAP_INTERVAL ({}) = {}; raise LPS_LEASE_TTL or lower the others",
                    humantime::format_duration(self.lease_ttl),
                    humantime::format_duration(self.heartbeat_interval),
                    humantime::format_duration(self.node_grace),
                    humantime::format_duration(self.reap_interval),
                    humantime::format_duration(silent_node),
                ),
            ));
        }
        if self.node_quarantine_drops > 0 {
            if self.node_quarantine_window.is_zero() {
                return Err(bad("LPS_NODE_QUARANTINE_WINDOW", "must be positive"));
            }
            if self.node_quarantine.is_zero() || self.node_quarantine > Duration::from_secs(86_400)
            {
                return Err(bad(
                    "LPS_NODE_QUARANTINE",
                    "must be positive and at most 24h",
                ));
            }
        }
        if self.job_deadline < Duration::from_secs(1)
            || self.job_deadline > Duration::from_secs(86_400)
        {
            return Err(bad("LPS_JOB_DEADLINE", "must be 1s..=24h"));
        }
        if self.max_attempts == 0 || self.max_attempts > 50 {
            return Err(bad("LPS_MAX_ATTEMPTS", "must be 1..=50"));
        }
        if self.backoff_cap < self.backoff_base {
            return Err(bad("LPS_BACKOFF_CAP", "must not be below LPS_BACKOFF_BASE"));
        }
        if self.negative_ttl_no_results > queue::MAX_NEGATIVE_TTL {
            return Err(bad("LPS_NEGATIVE_TTL_NO_RESULTS", "must be at most 30d"));
        }
        if self.negative_ttl_judged > self.negative_ttl_no_results {
            return Err(bad(
                "LPS_NEGATIVE_TTL_JUDGED",
                "must not be above LPS_NEGATIVE_TTL_NO_RESULTS (a judged not-found is the one that may be wrong)",
            ));
        }
        let json_logs = json_logs(&self.log_format)?;
        let malls = self
            .malls
            .iter()
            .map(|m| m.trim())
            .filter(|m| !m.is_empty())
            .map(|m| {
                lps_proto::model::MallId::new(m)
                    .map_err(|e| bad("LPS_MALLS", format!("{m:?}: {}", e.reason)))
            })
            .collect::<Result<Vec<_>, _>>()?;
        for (setting, value) in [
            ("LPS_ALERT_DEAD_1H", self.alert_dead_1h),
            ("LPS_ALERT_BLOCKS_1H", self.alert_blocks_1h),
            ("LPS_ALERT_STUCK", self.alert_stuck),
            ("LPS_ALERT_DEADLINE_KILLS_1H", self.alert_deadline_kills_1h),
            ("LPS_ALERT_COST_1H_USD", self.alert_cost_1h_usd),
            (
                "LPS_ALERT_PORTS_AVAILABLE_PCT",
                self.alert_ports_available_pct,
            ),
            ("LPS_ALERT_BLOCK_SESSIONS_6H", self.alert_block_sessions_6h),
            ("LPS_ALERT_DELIVERIES_DEAD", self.alert_deliveries_dead),
        ] {
            if !value.is_finite() || value < 0.0 {
                return Err(bad(setting, "must be a non-negative number"));
            }
        }
        if !(0.0..=1.0).contains(&self.alert_layout_share) {
            return Err(bad(
                "LPS_ALERT_LAYOUT_SHARE",
                "must be a share within 0..=1",
            ));
        }
        if self.alert_layout_min_attempts == 0 {
            return Err(bad("LPS_ALERT_LAYOUT_MIN_ATTEMPTS", "must be at least 1"));
        }
        let alert_webhook = match self.alert_webhook_url.as_deref().filter(|u| !u.is_empty()) {
            None => None,
            Some(url) => {
                // NB: never echo the URL: incoming-webhook URLs are secrets.
                let parsed = reqwest::Url::parse(url)
                    .ok()
                    .filter(|u| matches!(u.scheme(), "https" | "http") && u.has_host())
                    .ok_or_else(|| bad("LPS_ALERT_WEBHOOK_URL", "must be an http(s) URL"))?;
                let secret = self
                    .alert_webhook_secret
                    .as_deref()
                    .filter(|s| !s.is_empty());
                if secret.is_some_and(|s| s.len() < crate::delivery::config::MIN_SECRET_BYTES) {
                    return Err(bad(
                        "LPS_ALERT_WEBHOOK_SECRET",
                        format!(
                            "must be at least {} bytes",
                            crate::delivery::config::MIN_SECRET_BYTES
                        ),
                    ));
                }
                Some(crate::delivery::Destination::alert_webhook(parsed, secret))
            }
        };
        if alert_webhook.is_none()
            && self
                .alert_webhook_secret
                .as_deref()
                .is_some_and(|s| !s.is_empty())
        {
            return Err(bad(
                "LPS_ALERT_WEBHOOK_SECRET",
                "is set but LPS_ALERT_WEBHOOK_URL is not",
            ));
        }
        if self.alert_interval < Duration::from_millis(100) {
            return Err(bad("LPS_ALERT_INTERVAL", "must be at least 100ms"));
        }
        let alerts = crate::alerts::AlertConfig {
            thresholds: crate::alerts::Thresholds {
                dead_last_hour: self.alert_dead_1h,
                blocks_last_hour: self.alert_blocks_1h,
                oldest_queued: self.alert_oldest_queued,
                stuck_running: self.alert_stuck,
                deadline_kills_last_hour: self.alert_deadline_kills_1h,
                cost_usd_last_hour: self.alert_cost_1h_usd,
                ports_available_pct: self.alert_ports_available_pct,
                block_ended_sessions_6h: self.alert_block_sessions_6h,
                deliveries_dead: self.alert_deliveries_dead,
                layout_share: self.alert_layout_share,
                layout_min_attempts: self.alert_layout_min_attempts,
            },
            interval: self.alert_interval,
            fire_after: self.alert_for,
            resolve_after: self.alert_resolve_after,
            deployment: self.deployment.trim().to_owned(),
            replica: String::new(),
            webhook: alert_webhook.is_some(),
        };
        if alerts.deployment.is_empty() || alerts.deployment.len() > 128 {
            return Err(bad("LPS_DEPLOYMENT", "must be 1..=128 characters"));
        }
        if !self.proxy_usd_per_gb.is_finite() || self.proxy_usd_per_gb < 0.0 {
            return Err(bad("LPS_PROXY_USD_PER_GB", "must be a non-negative number"));
        }
        crate::queue::check_spend_cap(self.spend_cap_hourly_usd)
            .map_err(|reason| bad("LPS_SPEND_CAP_HOURLY_USD", reason))?;
        let ledger = self.ledger.validate()?;
        let retention = self.retention.validate()?;
        let mut delivery = self.delivery.validate()?;
        delivery.alert_webhook = alert_webhook;
        let schedule = self.schedule.validate()?;
        let tls = crate::tls::ServerTls::load(
            self.tls_cert.as_deref(),
            self.tls_key.as_deref(),
            self.tls_client_ca.as_deref(),
        )?;
        if self.http_tls && tls.is_none() {
            return Err(bad(
                "LPS_HTTP_TLS",
                "needs LPS_TLS_CERT and LPS_TLS_KEY (the HTTP port uses the same certificate)",
            ));
        }
        let coordinator_id = self.coordinator_id.unwrap_or_else(|| {
            let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "coordinator".into());
            format!("{host}-{}", std::process::id())
        });
        let alerts = crate::alerts::AlertConfig {
            replica: coordinator_id.clone(),
            ..alerts
        };
        Ok(Config {
            database_url,
            db_max_connections: self.db_max_connections,
            grpc_addr: self.grpc_addr,
            http_addr: self.http_addr,
            tls,
            http_tls: self.http_tls,
            tokens,
            client_limits,
            coordinator_id,
            config_revision: self.config_revision,
            heartbeat_interval: self.heartbeat_interval,
            lease_ttl: self.lease_ttl,
            node_grace: self.node_grace,
            node_quarantine: crate::node_session::QuarantinePolicy {
                drops: self.node_quarantine_drops,
                window: self.node_quarantine_window,
                back_off: self.node_quarantine,
            },
            job_deadline: self.job_deadline,
            max_attempts: self.max_attempts,
            backoff_base: self.backoff_base,
            backoff_cap: self.backoff_cap,
            negative_ttl_no_results: self.negative_ttl_no_results,
            negative_ttl_judged: self.negative_ttl_judged,
            reap_interval: self.reap_interval,
            claim_poll: self.claim_poll,
            shutdown_timeout: self.shutdown_timeout,
            json_logs,
            profiles_dir: self.profiles_dir,
            profiles_poll: self.profiles_poll,
            vocabulary_file: self.vocabulary_file.filter(|p| !p.as_os_str().is_empty()),
            malls,
            alerts,
            proxy_usd_per_gb: self.proxy_usd_per_gb,
            spend_cap_hourly_usd: self.spend_cap_hourly_usd,
            ledger,
            retention,
            delivery,
            schedule,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(extra: &[&str]) -> ServeArgs {
        let mut argv = vec![
            "coordinator",
            "--database-url",
            "postgres://x",
            "--client-tokens",
            "client-token-0123456789",
            "--node-tokens",
            "node-token-0123456789",
        ];
        argv.extend_from_slice(extra);
        Cli::try_parse_from(argv).unwrap().serve
    }

    #[test]
    fn the_library_defaults_are_the_flag_defaults() {
        for text in [
            DEFAULT_HEARTBEAT_INTERVAL,
            DEFAULT_LEASE_TTL,
            DEFAULT_NODE_GRACE,
            DEFAULT_JOB_DEADLINE,
            DEFAULT_BACKOFF_BASE,
            DEFAULT_BACKOFF_CAP,
            DEFAULT_REAP_INTERVAL,
            DEFAULT_CLAIM_POLL,
            crate::profiles::watch::DEFAULT_PROFILES_POLL,
            DEFAULT_SHUTDOWN_TIMEOUT,
            DEFAULT_ALERT_INTERVAL,
            DEFAULT_ALERT_FOR,
            DEFAULT_ALERT_RESOLVE_AFTER,
            DEFAULT_ALERT_OLDEST_QUEUED,
        ] {
            assert!(humantime::parse_duration(text).is_ok(), "{text}");
        }
        let config = args(&[]).validate().unwrap();
        let queue = crate::queue::QueueConfig::default();
        assert_eq!(
            (
                queue.lease_ttl,
                queue.run_timeout,
                queue.max_attempts,
                queue.backoff_base,
                queue.backoff_cap,
                queue.spend_cap_hourly_usd,
                queue.negative_ttl_no_results,
                queue.negative_ttl_judged,
            ),
            (
                config.lease_ttl,
                config.job_deadline,
                config.max_attempts,
                config.backoff_base,
                config.backoff_cap,
                config.spend_cap_hourly_usd,
                config.negative_ttl_no_results,
                config.negative_ttl_judged,
            )
        );
        assert_eq!(
            config.alerts.thresholds,
            crate::alerts::Thresholds::default()
        );
        assert_eq!(
            config.retention,
            crate::retention::RetentionConfig::default()
        );
        let gateway = args(&["--proxy-gateway-host", "gw", "--proxy-ports", "10001-10002"])
            .validate()
            .unwrap()
            .ledger
            .unwrap();
        let new = crate::ledger::LedgerConfig::new(
            "gw",
            gateway.ports.clone(),
            gateway.username.clone(),
            gateway.password.clone(),
        );
        assert_eq!(format!("{gateway:?}"), format!("{new:?}"));
    }

    #[test]
    fn migrate_needs_only_the_database_url() {
        let only_db = |extra: &[&str]| {
            let mut argv = vec!["coordinator"];
            argv.extend_from_slice(extra);
            argv.push("migrate");
            let cli = Cli::try_parse_from(argv).unwrap();
            assert!(matches!(cli.command, Some(Command::Migrate)));
            cli.serve
        };
        let c = only_db(&["--database-url", "postgres://x", "--log-format", "json"])
            .validate_migrate()
            .unwrap();
        assert_eq!(c.database_url, "postgres://x");
        assert!(c.json_logs);
        assert!(!format!("{c:?}").contains("postgres://x"), "{c:?}");
        let e = only_db(&["--database-url", "postgres://x"])
            .validate()
            .unwrap_err();
        assert_eq!(
            e.setting, "LPS_CLIENT_TOKENS",
            "serve still needs its tokens"
        );
        // NB: empty rather than absent, so a DATABASE_URL in the test's environment does not count.
        let e = only_db(&["--database-url="])
            .validate_migrate()
            .unwrap_err();
        assert_eq!(e.setting, "DATABASE_URL");
        let e = only_db(&["--database-url", "postgres://x", "--log-format", "xml"])
            .validate_migrate()
            .unwrap_err();
        assert_eq!(e.setting, "LPS_LOG_FORMAT");
    }

    #[test]
    fn defaults_validate() {
        let c = args(&[]).validate().unwrap();
        assert_eq!(c.node_grace, Duration::from_secs(15));
        assert_eq!(c.job_deadline, Duration::from_secs(300));
        assert_eq!(c.alerts.thresholds, crate::alerts::Thresholds::default());
        assert_eq!(c.vocabulary_file, None, "the built-in vocabulary");
        let c = args(&["--vocabulary-file", "/etc/lps/vocabulary.toml"])
            .validate()
            .unwrap();
        assert_eq!(
            c.vocabulary_file.as_deref(),
            Some(std::path::Path::new("/etc/lps/vocabulary.toml"))
        );
    }

    #[test]
    fn negative_cache_times_are_checked_naming_the_setting() {
        let ok = args(&[
            "--negative-ttl-no-results",
            "12h",
            "--negative-ttl-judged",
            "0s",
        ])
        .validate()
        .unwrap();
        assert_eq!(ok.negative_ttl_no_results, Duration::from_secs(12 * 3600));
        assert_eq!(ok.negative_ttl_judged, Duration::ZERO);
        for (flags, setting) in [
            (
                &["--negative-ttl-no-results", "31d"][..],
                "LPS_NEGATIVE_TTL_NO_RESULTS",
            ),
            (
                &[
                    "--negative-ttl-no-results",
                    "1h",
                    "--negative-ttl-judged",
                    "2h",
                ][..],
                "LPS_NEGATIVE_TTL_JUDGED",
            ),
        ] {
            let e = args(flags).validate().unwrap_err();
            assert_eq!(e.setting, setting, "{flags:?}: {e}");
        }
    }

    #[test]
    fn node_token_nodes_are_read_and_checked() {
        let ok = node_token_nodes(&["1=crawler-node-*|edge".into(), " ".into()], 2).unwrap();
        assert_eq!(
            ok,
            vec![Some(vec!["crawler-node-*".into(), "edge".into()]), None]
        );
        for bad_entry in ["3=a", "x=a", "1", "1=", "1=a b", "1=*"] {
            let e = node_token_nodes(&[bad_entry.into()], 2).unwrap_err();
            assert_eq!(e.setting, "LPS_NODE_TOKEN_NODES", "{bad_entry}");
        }
    }

    #[test]
    fn client_tokens_have_names_and_limits_name_clients() {
        let c = args(&[
            "--client-tokens",
            "team-a=secret-team-a-0001,dGhpcyBpcyBhIGJhc2U2NA==",
            "--admin-tokens",
            "ops=secret-ops-000000001",
            "--client-rate-limits",
            "team-a=20/s,*=100/min",
            "--client-concurrency-limits",
            "ops=4",
        ])
        .validate()
        .unwrap();
        let names: Vec<String> = c
            .tokens
            .client
            .iter()
            .map(|t| t.name("client").to_string())
            .collect();
        assert_eq!(names[1], "team-a");
        // Base64 padding is part of a bare token, not a name separator.
        assert!(names[2].starts_with("client-"), "{names:?}");
        assert_eq!(c.client_limits.by_client.len(), 3);
        assert_eq!(c.client_limits.by_client["ops"].concurrent, Some(4));
        let bad = |extra: &[&str], setting: &str| {
            let e = args(extra).validate().unwrap_err();
            assert_eq!(e.setting, setting, "{extra:?}: {e}");
            e.reason
        };
        bad(
            &["--client-tokens", "a=secret-a-00000001,a=secret-a-00000002"],
            "LPS_CLIENT_TOKENS",
        );
        bad(
            &[
                "--client-tokens",
                "x=secret-x-00000001",
                "--admin-tokens",
                "x=secret-x-00000002",
            ],
            "LPS_ADMIN_TOKENS",
        );
        let reason = bad(
            &["--client-rate-limits", "nobody=5/s"],
            "LPS_CLIENT_RATE_LIMITS",
        );
        assert!(reason.contains("\"nobody\""), "{reason}");
        bad(
            &["--client-rate-limits", "*=5/day"],
            "LPS_CLIENT_RATE_LIMITS",
        );
        bad(
            &["--client-concurrency-limits", "*=0"],
            "LPS_CLIENT_CONCURRENCY_LIMITS",
        );
    }

    #[test]
    fn a_silent_nodes_jobs_are_reclaimed_before_their_leases_run_out() {
        let c = args(&[]).validate().unwrap();
        let window = silent_node_window(c.heartbeat_interval, c.node_grace, c.reap_interval);
        assert!(
            c.lease_ttl >= window,
            "defaults: {:?} < {window:?}",
            c.lease_ttl
        );
        assert!(
            dispatch_silence(c.heartbeat_interval) + c.node_grace < c.lease_ttl,
            "silence + grace must end before the lease"
        );
        // 15 s silence + 15 s grace against a 30 s lease: the split the rule forbids.
        let e = args(&["--lease-ttl", "30s"]).validate().unwrap_err();
        assert_eq!(e.setting, "LPS_LEASE_TTL");
        assert!(e.reason.contains("41s"), "{e}");
        let e = args(&["--node-grace", "60s"]).validate().unwrap_err();
        assert_eq!(
            e.setting, "LPS_LEASE_TTL",
            "a longer grace needs a longer lease"
        );
        assert!(
            args(&["--node-grace", "60s", "--lease-ttl", "86s"])
                .validate()
                .is_ok()
        );
        let e = args(&["--heartbeat-interval", "10s"])
            .validate()
            .unwrap_err();
        assert_eq!(e.setting, "LPS_LEASE_TTL");
    }

    fn dispatch_silence(heartbeat: Duration) -> Duration {
        crate::dispatch::stream::silence_for(heartbeat)
    }

    #[test]
    fn the_pool_holds_the_listen_connections_and_work() {
        for n in ["1", "2", "3"] {
            let e = args(&["--db-max-connections", n]).validate().unwrap_err();
            assert_eq!(e.setting, "LPS_DB_MAX_CONNECTIONS", "{n}");
            assert!(e.reason.contains("LISTEN"), "{e}");
        }
        assert!(args(&["--db-max-connections", "4"]).validate().is_ok());
    }

    #[test]
    fn bad_settings_are_named() {
        let e = args(&["--node-tokens", "short"]).validate().unwrap_err();
        assert_eq!(e.setting, "LPS_NODE_TOKENS");
        let e = args(&["--lease-ttl", "1s"]).validate().unwrap_err();
        assert_eq!(e.setting, "LPS_LEASE_TTL");
        let e = args(&["--log-format", "xml"]).validate().unwrap_err();
        assert_eq!(e.setting, "LPS_LOG_FORMAT");
        let e = args(&["--alert-layout-share", "1.5"])
            .validate()
            .unwrap_err();
        assert_eq!(e.setting, "LPS_ALERT_LAYOUT_SHARE");
        let e = args(&["--alert-layout-share", "NaN"])
            .validate()
            .unwrap_err();
        assert_eq!(e.setting, "LPS_ALERT_LAYOUT_SHARE");
        let e = args(&["--alert-layout-min-attempts", "0"])
            .validate()
            .unwrap_err();
        assert_eq!(e.setting, "LPS_ALERT_LAYOUT_MIN_ATTEMPTS");
        // Each zero duration is named as itself.
        for (flag, setting) in [
            ("--reap-interval", "LPS_REAP_INTERVAL"),
            ("--claim-poll", "LPS_CLAIM_POLL"),
            ("--shutdown-timeout", "LPS_SHUTDOWN_TIMEOUT"),
            ("--schedule-poll", "LPS_SCHEDULE_POLL"),
            ("--schedule-claim-ttl", "LPS_SCHEDULE_CLAIM_TTL"),
            ("--schedule-min-interval", "LPS_SCHEDULE_MIN_INTERVAL"),
        ] {
            let e = args(&[flag, "0s"]).validate().unwrap_err();
            assert_eq!(e.setting, setting, "{flag} 0s");
        }
        let e = Cli::try_parse_from(["coordinator", "--job-deadline", "soon"]).unwrap_err();
        assert!(e.to_string().contains("job-deadline"), "{e}");
    }

    #[test]
    fn the_spend_cap_is_optional_and_positive() {
        assert_eq!(args(&[]).validate().unwrap().spend_cap_hourly_usd, None);
        let c = args(&["--spend-cap-hourly-usd", "2.5"]).validate().unwrap();
        assert_eq!(c.spend_cap_hourly_usd, Some(2.5));
        for bad in ["0", "-1", "NaN", "inf"] {
            let flag = format!("--spend-cap-hourly-usd={bad}");
            let e = args(&[&flag]).validate().unwrap_err();
            assert_eq!(e.setting, "LPS_SPEND_CAP_HOURLY_USD", "{bad}");
        }
        let e = Cli::try_parse_from(["coordinator", "--spend-cap-hourly-usd", "lots"]).unwrap_err();
        assert!(e.to_string().contains("spend-cap-hourly-usd"), "{e}");
    }

    /// Every `--flag` is named as its `LPS_*` variable (`--node-slots`, LPS_NODE_SLOTS).
    #[test]
    fn flags_are_named_as_their_variables() {
        use clap::CommandFactory as _;
        let wrong = lps_test_kit::checks::misnamed_flags(&Cli::command());
        assert!(wrong.is_empty(), "{wrong:?}");
    }
}
