//! The node's settings: command-line flags, each also read from an `LPS_…` environment
//! variable (the way Kubernetes sets them).
//!
//! [`Config`] is what clap parses; [`Config::validate`] checks what clap cannot (ranges,
//! the node id's alphabet, the coordinator URL, TLS file pairs) and fails naming the
//! setting, so a bad deployment stops at start-up with one clear line. The node token and
//! the LLM key are [`Secret`]s: their `Debug` hides them and they are never logged or
//! echoed in an error.
//! Nothing here is persisted.

use std::{net::SocketAddr, path::PathBuf, str::FromStr, time::Duration};

use clap::{Parser, ValueEnum};

pub use crate::chromium::BrowserMode;
use lps_proto::model::{MAX_SLOTS, MallId};

use crate::llm::LlmSettings;

/// `LPS_COORDINATOR_URL` default.
pub const DEFAULT_COORDINATOR_URL: &str = "http://127.0.0.1:50051";
/// `LPS_NODE_SLOTS` default.
pub const DEFAULT_SLOTS: u32 = 2;
/// `LPS_DRAIN_TIMEOUT` default.
pub const DEFAULT_DRAIN_TIMEOUT: &str = "240s";
/// `LPS_RECONNECT_DEADLINE` default.
pub const DEFAULT_RECONNECT_DEADLINE: &str = "5m";
/// `LPS_HTTP_ADDR` default.
pub const DEFAULT_HTTP_ADDR: &str = "0.0.0.0:9090";
/// `LPS_CHROMEDRIVER_PATH` default.
pub const DEFAULT_CHROMEDRIVER_PATH: &str = "/usr/bin/chromedriver";
/// `LPS_CHROMIUM_PATH` default.
pub const DEFAULT_CHROMIUM_PATH: &str = "/usr/bin/chromium";
/// Default `LPS_XVFB_PATH`.
pub const DEFAULT_XVFB_PATH: &str = "/usr/bin/Xvfb";
/// Default `LPS_IP_PAGE_GAP`.
pub const DEFAULT_IP_PAGE_GAP: &str = "2s";
/// `LPS_LLM_TIMEOUT` default.
pub const DEFAULT_LLM_TIMEOUT: &str = "20s";
/// Longest `LPS_LLM_TIMEOUT` accepted: a job's rounds share its deadline (300 s by default).
pub const MAX_LLM_TIMEOUT: Duration = Duration::from_secs(120);
/// Longest node id the coordinator accepts (`Hello.node_id`).
pub const MAX_NODE_ID_CHARS: usize = 128;

pub use crate::secret::Secret;

/// Log output format (`LPS_LOG_FORMAT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

/// Which executor runs the jobs (`LPS_EXECUTOR`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExecutorKind {
    /// Real headless Chromium (`BrowserExecutor`; the default).
    Browser,
    /// The product name decides the outcome (`ScriptedExecutor`): for tests and trials
    /// without a browser.
    Scripted,
}

/// Where the browser's traffic goes (`LPS_PROXY_MODE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ProxyMode {
    /// Through proxy ports leased from the coordinator's ledger, via a local relay per
    /// browser (the production setting).
    Coordinator,
    /// Straight to the malls, no proxy (development; bytes are not metered).
    Direct,
}

/// The node's settings.
#[derive(Debug, Clone, Parser)]
#[command(name = "crawler-node", version, about = "LPS crawler node")]
pub struct Config {
    /// The coordinator's NodeService address (`http://` or `https://`).
    #[arg(long, env = "LPS_COORDINATOR_URL", default_value = DEFAULT_COORDINATOR_URL)]
    pub coordinator_url: String,

    /// Bearer token presented to the coordinator (a secret; never logged).
    #[arg(long, env = "LPS_NODE_TOKEN", hide_env_values = true)]
    pub node_token: Secret,

    /// Stable node name, 1..=128 chars of [A-Za-z0-9._-] (the pod name). Default: the host
    /// name.
    #[arg(long, env = "LPS_NODE_ID", default_value_t = default_node_id())]
    pub node_id: String,

    /// Browser slots: how many jobs run at once (1..=64).
    #[arg(long = "node-slots", alias = "slots", env = "LPS_NODE_SLOTS", default_value_t = DEFAULT_SLOTS)]
    pub slots: u32,

    /// Mall ids this node crawls, comma-separated; empty = every mall.
    #[arg(long, env = "LPS_MALLS", default_value = "")]
    pub malls: MallList,

    /// How long a drain (SIGTERM or the coordinator's Drain) may take in total: running
    /// jobs finish, the rest are handed back, every report is acknowledged, Goodbye.
    #[arg(long, env = "LPS_DRAIN_TIMEOUT", default_value = DEFAULT_DRAIN_TIMEOUT, value_parser = humantime::parse_duration)]
    pub drain_timeout: Duration,

    /// How long the node keeps retrying a lost (or never reached) coordinator before it
    /// exits non-zero.
    #[arg(long, env = "LPS_RECONNECT_DEADLINE", default_value = DEFAULT_RECONNECT_DEADLINE, value_parser = humantime::parse_duration)]
    pub reconnect_deadline: Duration,

    /// Address of the HTTP server for `/healthz`, `/readyz` and `/metrics`.
    #[arg(long, env = "LPS_HTTP_ADDR", default_value = DEFAULT_HTTP_ADDR)]
    pub http_addr: SocketAddr,

    /// Log format: `text` or `json`.
    #[arg(long, env = "LPS_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// Which executor runs jobs: `browser` (headless Chromium) or `scripted` (tests).
    #[arg(long, env = "LPS_EXECUTOR", value_enum, default_value_t = ExecutorKind::Browser)]
    pub executor: ExecutorKind,

    /// chromedriver binary the node starts and supervises (unless LPS_WEBDRIVER_URL).
    #[arg(long, env = "LPS_CHROMEDRIVER_PATH", default_value = DEFAULT_CHROMEDRIVER_PATH)]
    pub chromedriver_path: PathBuf,

    /// A WebDriver server to use instead of starting chromedriver (`http://host:port`).
    #[arg(long, env = "LPS_WEBDRIVER_URL")]
    pub webdriver_url: Option<String>,

    /// Chromium binary (one browser per slot).
    #[arg(long, env = "LPS_CHROMIUM_PATH", default_value = DEFAULT_CHROMIUM_PATH)]
    pub chromium_path: PathBuf,

    /// Directory of the browser profile slots (user-data-dirs, one file lock each; kept
    /// across restarts so warm cookies survive). Default: `<tmp>/lps-profiles`.
    #[arg(long, env = "LPS_PROFILE_ROOT", default_value_os_t = default_profile_root())]
    pub profile_root: PathBuf,

    /// Proxy use: `coordinator` (ports leased from the coordinator, through a local relay)
    /// or `direct` (no proxy; development).
    #[arg(long, env = "LPS_PROXY_MODE", value_enum, default_value_t = ProxyMode::Coordinator)]
    pub proxy_mode: ProxyMode,

    /// Block images, fonts and media in the browser (CDP Network.setBlockedURLs).
    #[arg(long, env = "LPS_BLOCK_RESOURCES", default_value_t = true, action = clap::ArgAction::Set)]
    pub block_resources: bool,

    /// `headless` (no display) or `headful` (a real window under an Xvfb the node starts
    /// and supervises). Both show the same identity (DESIGN §5 "Browser identity").
    #[arg(long, env = "LPS_BROWSER_MODE", value_enum, default_value_t = BrowserMode::Headless)]
    pub browser_mode: BrowserMode,

    /// Show the browser identity (DESIGN §5). `false` only to measure what it costs: the
    /// browser then gives itself away as plain headless Chromium.
    #[arg(long, env = "LPS_BROWSER_STEALTH", default_value_t = true, action = clap::ArgAction::Set)]
    pub browser_stealth: bool,

    /// Xvfb binary for headful mode.
    #[arg(long, env = "LPS_XVFB_PATH", default_value = DEFAULT_XVFB_PATH)]
    pub xvfb_path: PathBuf,

    /// Least time between the starts of two page loads on one exit IP, whichever slot
    /// loads them (on top of the mall's start gap); each gap adds up to half of it again
    /// at random. `0s` = no pacing.
    #[arg(long, env = "LPS_IP_PAGE_GAP", default_value = DEFAULT_IP_PAGE_GAP, value_parser = humantime::parse_duration)]
    pub ip_page_gap: Duration,

    /// Become ready even when the start-up self-check finds the browser revealing
    /// automation (`crawler-node self-check`); by default such a node is not ready.
    #[arg(long, env = "LPS_ALLOW_BROWSER_LEAKS", default_value_t = false, action = clap::ArgAction::Set)]
    pub allow_browser_leaks: bool,

    /// More Chromium flags, space-separated (after the built-in quiet headless ones).
    #[arg(
        long,
        env = "LPS_CHROMIUM_ARGS",
        value_delimiter = ' ',
        num_args = 1,
        allow_hyphen_values = true
    )]
    pub chromium_args: Vec<String>,

    /// PEM file of the CA that signs the coordinator's certificate (needed for `https://`).
    #[arg(long, env = "LPS_TLS_CA")]
    pub tls_ca: Option<PathBuf>,

    /// PEM certificate this node presents (mTLS); needs `LPS_TLS_KEY`.
    #[arg(long, env = "LPS_TLS_CERT")]
    pub tls_cert: Option<PathBuf>,

    /// PEM private key of `LPS_TLS_CERT`.
    #[arg(long, env = "LPS_TLS_KEY")]
    pub tls_key: Option<PathBuf>,

    /// Base URL of an OpenAI-compatible API (`https://api.openai.com/v1`), asked for more
    /// search strings and a second opinion on cards only when the rule-based rounds found
    /// nothing on healthy pages. Unset or empty: rule-based only.
    #[arg(long, env = "LPS_LLM_BASE_URL")]
    pub llm_base_url: Option<String>,

    /// Model name sent to the LLM endpoint (needed with LPS_LLM_BASE_URL).
    #[arg(long, env = "LPS_LLM_MODEL")]
    pub llm_model: Option<String>,

    /// Bearer key of the LLM endpoint (a secret; never logged). Optional.
    #[arg(long, env = "LPS_LLM_API_KEY", hide_env_values = true)]
    pub llm_api_key: Option<Secret>,

    /// Longest one LLM call may take; a call past it counts as "no answer".
    #[arg(long, env = "LPS_LLM_TIMEOUT", default_value = DEFAULT_LLM_TIMEOUT, value_parser = humantime::parse_duration)]
    pub llm_timeout: Duration,

    /// USD per LLM call, added to each job's reported cost (bytes × the coordinator's
    /// price per GB + LLM calls × this).
    #[arg(long, env = "LPS_LLM_USD_PER_CALL", default_value_t = 0.0)]
    pub llm_usd_per_call: f64,
}

/// A setting that is not acceptable, named by its environment variable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{setting}: {reason}")]
pub struct ConfigError {
    pub setting: &'static str,
    pub reason: String,
}

impl ConfigError {
    fn new(setting: &'static str, reason: impl Into<String>) -> Self {
        Self {
            setting,
            reason: reason.into(),
        }
    }
}

impl Config {
    /// The defaults of every setting with this coordinator and token: what tests start
    /// in-process nodes with. The defaults are the flags' (`DEFAULT_*` above), read by clap
    /// with every `LPS_*` variable ignored, so they are written once.
    pub fn new(coordinator_url: impl Into<String>, node_token: impl Into<String>) -> Self {
        use clap::{CommandFactory as _, FromArgMatches as _};
        let command = Self::command().mut_args(|arg| arg.env(None::<&str>));
        let mut config = command
            .try_get_matches_from(["crawler-node", "--node-token", "-"])
            .and_then(|matches| Self::from_arg_matches(&matches))
            .unwrap_or_else(|e| panic!("the node's flag defaults do not parse: {e}"));
        config.coordinator_url = coordinator_url.into();
        config.node_token = Secret::new(node_token);
        config
    }

    /// Checks what clap cannot; the error names the setting.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let url = self.coordinator_url.trim();
        let Some((scheme, rest)) = url.split_once("://") else {
            return Err(ConfigError::new(
                "LPS_COORDINATOR_URL",
                format!("{url:?} is not a URL like http://coordinator:50051"),
            ));
        };
        if !matches!(scheme, "http" | "https") || rest.is_empty() {
            return Err(ConfigError::new(
                "LPS_COORDINATOR_URL",
                format!("{url:?}: the scheme must be http or https and a host is needed"),
            ));
        }
        if let Err(e) = tonic::transport::Endpoint::from_shared(url.to_owned()) {
            return Err(ConfigError::new(
                "LPS_COORDINATOR_URL",
                format!("{url:?}: {e}"),
            ));
        }
        if scheme == "https" && self.tls_ca.is_none() {
            return Err(ConfigError::new(
                "LPS_TLS_CA",
                "an https:// coordinator needs the CA certificate that signs it",
            ));
        }
        if self.tls_cert.is_some() != self.tls_key.is_some() {
            let setting = if self.tls_cert.is_some() {
                "LPS_TLS_KEY"
            } else {
                "LPS_TLS_CERT"
            };
            return Err(ConfigError::new(
                setting,
                "LPS_TLS_CERT and LPS_TLS_KEY go together",
            ));
        }
        if self.node_token.expose().trim().is_empty() {
            return Err(ConfigError::new("LPS_NODE_TOKEN", "must not be empty"));
        }
        if self
            .node_token
            .expose()
            .bytes()
            .any(|b| !(0x21..0x7f).contains(&b))
        {
            // NB: the reason must not echo the token.
            return Err(ConfigError::new(
                "LPS_NODE_TOKEN",
                "only printable ASCII without spaces is allowed",
            ));
        }
        let id = &self.node_id;
        if id.is_empty() || id.chars().count() > MAX_NODE_ID_CHARS {
            return Err(ConfigError::new(
                "LPS_NODE_ID",
                format!("must be 1..={MAX_NODE_ID_CHARS} characters, got {id:?}"),
            ));
        }
        if !id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        {
            return Err(ConfigError::new(
                "LPS_NODE_ID",
                format!("only letters, digits, '.', '_' and '-' are allowed, got {id:?}"),
            ));
        }
        if self.slots == 0 || self.slots > MAX_SLOTS {
            return Err(ConfigError::new(
                "LPS_NODE_SLOTS",
                format!("must be 1..={MAX_SLOTS}, got {}", self.slots),
            ));
        }
        for (i, mall) in self.malls.iter().enumerate() {
            if self.malls[..i].contains(mall) {
                return Err(ConfigError::new(
                    "LPS_MALLS",
                    format!("{mall} is listed twice"),
                ));
            }
        }
        if self.drain_timeout < Duration::from_millis(100) {
            return Err(ConfigError::new(
                "LPS_DRAIN_TIMEOUT",
                format!("must be at least 100ms, got {:?}", self.drain_timeout),
            ));
        }
        if self.reconnect_deadline.is_zero() {
            return Err(ConfigError::new(
                "LPS_RECONNECT_DEADLINE",
                "must be more than zero",
            ));
        }
        if let Some(url) = &self.webdriver_url {
            let ok = url
                .strip_prefix("http://")
                .is_some_and(|rest| !rest.trim_matches('/').is_empty());
            if !ok {
                return Err(ConfigError::new(
                    "LPS_WEBDRIVER_URL",
                    format!("{url:?} is not a URL like http://127.0.0.1:9515"),
                ));
            }
        }
        if self.profile_root.as_os_str().is_empty() {
            return Err(ConfigError::new("LPS_PROFILE_ROOT", "must not be empty"));
        }
        self.llm().map(drop)
    }

    /// The LLM endpoint settings, `None` without `LPS_LLM_BASE_URL` (then the other
    /// `LPS_LLM_*` settings are ignored); the error names the bad setting and never echoes
    /// the key.
    pub fn llm(&self) -> Result<Option<LlmSettings>, ConfigError> {
        let Some(base) = self
            .llm_base_url
            .as_deref()
            .map(str::trim)
            .filter(|u| !u.is_empty())
        else {
            return Ok(None);
        };
        let bad_url = |why: &str| {
            ConfigError::new(
                "LPS_LLM_BASE_URL",
                format!("{base:?} {why}; want a URL like https://api.openai.com/v1"),
            )
        };
        let url = reqwest::Url::parse(base).map_err(|e| bad_url(&format!("is not a URL ({e})")))?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none_or(str::is_empty) {
            return Err(bad_url("needs the scheme http or https and a host"));
        }
        if !url.username().is_empty() || url.password().is_some() {
            // NB: the reason must not echo the credentials.
            return Err(ConfigError::new(
                "LPS_LLM_BASE_URL",
                "must not hold credentials; put the key in LPS_LLM_API_KEY",
            ));
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err(bad_url("must not have a query or fragment"));
        }
        let model = self.llm_model.as_deref().map(str::trim).unwrap_or_default();
        if model.is_empty() {
            return Err(ConfigError::new(
                "LPS_LLM_MODEL",
                "is needed when LPS_LLM_BASE_URL is set",
            ));
        }
        if model.chars().count() > 200 || model.chars().any(char::is_control) {
            return Err(ConfigError::new(
                "LPS_LLM_MODEL",
                "must be at most 200 characters without control characters",
            ));
        }
        let api_key = self
            .llm_api_key
            .clone()
            .filter(|k| !k.expose().trim().is_empty());
        if api_key
            .as_ref()
            .is_some_and(|k| k.expose().bytes().any(|b| !(0x21..0x7f).contains(&b)))
        {
            // NB: the reason must not echo the key.
            return Err(ConfigError::new(
                "LPS_LLM_API_KEY",
                "only printable ASCII without spaces is allowed",
            ));
        }
        if self.llm_timeout.is_zero() || self.llm_timeout > MAX_LLM_TIMEOUT {
            return Err(ConfigError::new(
                "LPS_LLM_TIMEOUT",
                format!(
                    "must be more than zero and at most {MAX_LLM_TIMEOUT:?}, got {:?}",
                    self.llm_timeout
                ),
            ));
        }
        if !self.llm_usd_per_call.is_finite() || self.llm_usd_per_call < 0.0 {
            return Err(ConfigError::new(
                "LPS_LLM_USD_PER_CALL",
                format!(
                    "must be a price of 0 or more, got {}",
                    self.llm_usd_per_call
                ),
            ));
        }
        Ok(Some(LlmSettings {
            base_url: url,
            model: model.to_owned(),
            api_key,
            timeout: self.llm_timeout,
            usd_per_call: self.llm_usd_per_call,
        }))
    }

    /// What the browser executor needs on this host: the Chromium binary and (without
    /// `LPS_WEBDRIVER_URL`) the chromedriver binary. Checked at start-up by the binary
    /// only, so tests that run other executors need neither.
    pub fn check_browser_host(&self) -> Result<(), ConfigError> {
        if self.webdriver_url.is_none() && !self.chromedriver_path.is_file() {
            return Err(ConfigError::new(
                "LPS_CHROMEDRIVER_PATH",
                format!(
                    "{} does not exist (install chromium-driver, or set LPS_WEBDRIVER_URL)",
                    self.chromedriver_path.display()
                ),
            ));
        }
        if self.webdriver_url.is_none() && !self.chromium_path.is_file() {
            return Err(ConfigError::new(
                "LPS_CHROMIUM_PATH",
                format!("{} does not exist", self.chromium_path.display()),
            ));
        }
        Ok(())
    }
}

/// `LPS_PROFILE_ROOT` default: `lps-profiles` in the temporary directory.
pub fn default_profile_root() -> PathBuf {
    std::env::temp_dir().join("lps-profiles")
}

/// The malls of `LPS_MALLS`: a comma-separated list, white space and empty items ignored,
/// so an empty (or unset) variable means every mall.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MallList(pub Vec<MallId>);

impl MallList {
    pub fn new(malls: impl IntoIterator<Item = MallId>) -> Self {
        Self(malls.into_iter().collect())
    }
}

impl std::ops::Deref for MallList {
    type Target = [MallId];

    fn deref(&self) -> &[MallId] {
        &self.0
    }
}

impl FromStr for MallList {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        text.split(',')
            .map(str::trim)
            .filter(|item| !item.is_empty())
            .map(|item| MallId::new(item).map_err(|e| format!("{item:?}: {}", e.reason)))
            .collect::<Result<Vec<_>, _>>()
            .map(Self)
    }
}

/// The host name (`/proc/sys/kernel/hostname`, then `$HOSTNAME`), else `crawler-node`.
pub fn default_node_id() -> String {
    let from_proc = std::fs::read_to_string("/proc/sys/kernel/hostname").ok();
    let from_env = std::env::var("HOSTNAME").ok();
    let host: String = from_proc
        .into_iter()
        .chain(from_env)
        .map(|name| name.trim().to_owned())
        .find(|name| !name.is_empty())
        .unwrap_or_else(|| "crawler-node".to_owned())
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || "._-".contains(*c))
        .take(MAX_NODE_ID_CHARS - 11)
        .collect();
    // NB: with the pid, two nodes on one host do not share an id (a pod's node is pid 1,
    // so its id stays the pod name's `-1`).
    format!("{host}-{}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Config, clap::Error> {
        let mut argv = vec!["crawler-node", "--node-token", "t0ken", "--node-id", "n1"];
        argv.extend_from_slice(args);
        Config::try_parse_from(argv)
    }

    #[test]
    fn new_has_the_flag_defaults() {
        let config = Config::new("http://127.0.0.1:1", "t0ken");
        assert_eq!(config.coordinator_url, "http://127.0.0.1:1");
        assert_eq!(config.node_token.expose(), "t0ken");
        assert_eq!(config.slots, DEFAULT_SLOTS);
        assert_eq!(config.drain_timeout, Duration::from_secs(240));
        assert_eq!(config.ip_page_gap, Duration::from_secs(2));
        assert_eq!(config.http_addr.to_string(), DEFAULT_HTTP_ADDR);
        assert!(config.block_resources && config.browser_stealth);
        config.validate().unwrap();
    }

    #[test]
    fn defaults_are_valid() {
        let config = parse(&[]).unwrap();
        config.validate().unwrap();
        assert_eq!(config.slots, 2);
        assert_eq!(config.drain_timeout, Duration::from_secs(240));
        assert_eq!(config.reconnect_deadline, Duration::from_secs(300));
        assert_eq!(config.http_addr.port(), 9090);
        assert!(config.malls.is_empty());
        let same = Config::new(DEFAULT_COORDINATOR_URL, "t0ken");
        assert_eq!(same.drain_timeout, config.drain_timeout);
        assert_eq!(same.reconnect_deadline, config.reconnect_deadline);
        assert_eq!(same.http_addr, config.http_addr);
        same.validate().unwrap();
    }

    #[test]
    fn durations_and_malls_parse() {
        let config = parse(&[
            "--drain-timeout",
            "30s",
            "--reconnect-deadline",
            "2m",
            "--malls",
            "naver, coupang",
            "--log-format",
            "json",
        ])
        .unwrap();
        assert_eq!(config.drain_timeout, Duration::from_secs(30));
        assert_eq!(config.reconnect_deadline, Duration::from_secs(120));
        let malls: Vec<&str> = config.malls.iter().map(MallId::as_str).collect();
        assert_eq!(malls, ["naver", "coupang"]);
        assert_eq!(config.log_format, LogFormat::Json);
        assert!(parse(&["--malls", "Naver"]).is_err());
        assert!(parse(&["--malls", ""]).unwrap().malls.is_empty());
        assert!(parse(&["--malls", " , "]).unwrap().malls.is_empty());
        assert!(parse(&["--drain-timeout", "soon"]).is_err());
        // The flag is named as its variable (LPS_NODE_SLOTS); the old name still works.
        assert_eq!(parse(&["--node-slots", "3"]).unwrap().slots, 3);
        assert_eq!(parse(&["--slots", "4"]).unwrap().slots, 4);
    }

    #[test]
    fn browser_settings_parse() {
        let config = parse(&[]).unwrap();
        assert_eq!(config.executor, ExecutorKind::Browser);
        assert_eq!(config.proxy_mode, ProxyMode::Coordinator);
        assert!(config.block_resources);
        assert!(config.chromium_args.is_empty());
        let config = parse(&[
            "--executor",
            "scripted",
            "--proxy-mode",
            "direct",
            "--block-resources",
            "false",
            "--chromium-args",
            "--lang=en-US --window-size=800,600",
            "--webdriver-url",
            "http://127.0.0.1:9515",
        ])
        .unwrap();
        config.validate().unwrap();
        assert_eq!(config.executor, ExecutorKind::Scripted);
        assert_eq!(config.proxy_mode, ProxyMode::Direct);
        assert!(!config.block_resources);
        assert_eq!(
            config.chromium_args,
            ["--lang=en-US", "--window-size=800,600"]
        );
        let missing = Config {
            chromedriver_path: "/nonexistent/chromedriver".into(),
            ..config.clone()
        };
        assert!(
            missing.check_browser_host().is_ok(),
            "an external WebDriver URL is used"
        );
        let missing = Config {
            webdriver_url: None,
            ..missing
        };
        assert_eq!(
            missing.check_browser_host().unwrap_err().setting,
            "LPS_CHROMEDRIVER_PATH"
        );
    }

    #[test]
    fn bad_settings_are_named() {
        let good = Config::new("http://127.0.0.1:50051", "t0ken");
        type Change = Box<dyn Fn(&mut Config)>;
        let cases: Vec<(Change, &str)> = vec![
            (Box::new(|c| c.slots = 0), "LPS_NODE_SLOTS"),
            (Box::new(|c| c.slots = 65), "LPS_NODE_SLOTS"),
            (Box::new(|c| c.node_id = "a b".into()), "LPS_NODE_ID"),
            (Box::new(|c| c.node_id = String::new()), "LPS_NODE_ID"),
            (Box::new(|c| c.node_id = "x".repeat(129)), "LPS_NODE_ID"),
            (
                Box::new(|c| c.node_token = Secret::new("")),
                "LPS_NODE_TOKEN",
            ),
            (
                Box::new(|c| c.node_token = Secret::new("has space")),
                "LPS_NODE_TOKEN",
            ),
            (
                Box::new(|c| c.coordinator_url = "127.0.0.1:50051".into()),
                "LPS_COORDINATOR_URL",
            ),
            (
                Box::new(|c| c.coordinator_url = "ftp://x".into()),
                "LPS_COORDINATOR_URL",
            ),
            (
                Box::new(|c| c.coordinator_url = "https://coordinator:50051".into()),
                "LPS_TLS_CA",
            ),
            (
                Box::new(|c| c.tls_cert = Some("/tls/tls.crt".into())),
                "LPS_TLS_KEY",
            ),
            (
                Box::new(|c| c.drain_timeout = Duration::ZERO),
                "LPS_DRAIN_TIMEOUT",
            ),
            (
                Box::new(|c| c.reconnect_deadline = Duration::ZERO),
                "LPS_RECONNECT_DEADLINE",
            ),
            (
                Box::new(|c| c.webdriver_url = Some("127.0.0.1:9515".into())),
                "LPS_WEBDRIVER_URL",
            ),
            (
                Box::new(|c| c.profile_root = PathBuf::new()),
                "LPS_PROFILE_ROOT",
            ),
            (
                Box::new(|c| {
                    c.malls = MallList::new([
                        MallId::new("naver").unwrap(),
                        MallId::new("naver").unwrap(),
                    ])
                }),
                "LPS_MALLS",
            ),
        ];
        for (change, setting) in cases {
            let mut config = good.clone();
            change(&mut config);
            let err = config.validate().unwrap_err();
            assert_eq!(err.setting, setting, "{err}");
        }
    }

    #[test]
    fn llm_settings_parse_and_are_checked() {
        let config = parse(&[]).unwrap();
        assert!(
            config.llm().unwrap().is_none(),
            "rule-based only by default"
        );
        assert_eq!(config.llm_timeout, Duration::from_secs(20));
        let config = parse(&[
            "--llm-base-url",
            "https://llm.internal:8443/v1/",
            "--llm-model",
            " gpt-4o-mini ",
            "--llm-api-key",
            "sk-s3cr3t",
            "--llm-timeout",
            "5s",
            "--llm-usd-per-call",
            "0.002",
        ])
        .unwrap();
        config.validate().unwrap();
        let llm = config.llm().unwrap().expect("configured");
        assert_eq!(llm.base_url.as_str(), "https://llm.internal:8443/v1/");
        assert_eq!(llm.model, "gpt-4o-mini");
        assert_eq!(llm.api_key.as_ref().map(Secret::expose), Some("sk-s3cr3t"));
        assert_eq!(llm.timeout, Duration::from_secs(5));
        assert!((llm.usd_per_call - 0.002).abs() < 1e-12);
        assert!(!format!("{config:?} {llm:?}").contains("s3cr3t"));
        // An empty base URL (what an unset chart value may give) means "off".
        let off = parse(&["--llm-base-url", " ", "--llm-model", ""]).unwrap();
        assert!(off.llm().unwrap().is_none());

        let good = Config {
            llm_base_url: Some("http://127.0.0.1:8000/v1".into()),
            llm_model: Some("m".into()),
            ..Config::new("http://127.0.0.1:50051", "t0ken")
        };
        good.validate().unwrap();
        type Change = Box<dyn Fn(&mut Config)>;
        let cases: Vec<(Change, &str)> = vec![
            (
                Box::new(|c| c.llm_base_url = Some("api.openai.com/v1".into())),
                "LPS_LLM_BASE_URL",
            ),
            (
                Box::new(|c| c.llm_base_url = Some("ftp://llm/v1".into())),
                "LPS_LLM_BASE_URL",
            ),
            (
                Box::new(|c| c.llm_base_url = Some("http://u:sk-s3cr3t@llm/v1".into())),
                "LPS_LLM_BASE_URL",
            ),
            (
                Box::new(|c| c.llm_base_url = Some("http://llm/v1?key=1".into())),
                "LPS_LLM_BASE_URL",
            ),
            (Box::new(|c| c.llm_model = None), "LPS_LLM_MODEL"),
            (
                Box::new(|c| c.llm_model = Some("  ".into())),
                "LPS_LLM_MODEL",
            ),
            (
                Box::new(|c| c.llm_api_key = Some(Secret::new("sk s3cr3t"))),
                "LPS_LLM_API_KEY",
            ),
            (
                Box::new(|c| c.llm_timeout = Duration::ZERO),
                "LPS_LLM_TIMEOUT",
            ),
            (
                Box::new(|c| c.llm_timeout = Duration::from_secs(600)),
                "LPS_LLM_TIMEOUT",
            ),
            (
                Box::new(|c| c.llm_usd_per_call = -1.0),
                "LPS_LLM_USD_PER_CALL",
            ),
            (
                Box::new(|c| c.llm_usd_per_call = f64::NAN),
                "LPS_LLM_USD_PER_CALL",
            ),
        ];
        for (change, setting) in cases {
            let mut config = good.clone();
            change(&mut config);
            let err = config.validate().unwrap_err();
            assert_eq!(err.setting, setting, "{err}");
            assert!(!err.to_string().contains("s3cr3t"), "{err}");
        }
    }

    #[test]
    fn the_token_is_never_shown() {
        let config = Config::new("http://127.0.0.1:50051", "s3cr3t-token");
        assert!(!format!("{config:?}").contains("s3cr3t"));
        assert_eq!(config.node_token.to_string(), "***");
        let mut bad = config.clone();
        bad.node_token = Secret::new("s3cr3t token");
        assert!(!bad.validate().unwrap_err().to_string().contains("s3cr3t"));
    }

    /// Every `--flag` is named as its `LPS_*` variable (`--node-slots`, LPS_NODE_SLOTS).
    #[test]
    fn flags_are_named_as_their_variables() {
        use clap::CommandFactory as _;
        let wrong = lps_test_kit::checks::misnamed_flags(&Config::command());
        assert!(wrong.is_empty(), "{wrong:?}");
    }
}
