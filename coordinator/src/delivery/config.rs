//! The delivery settings: named destinations (URL and signing secret, both secrets: a URL
//! may carry a receiver's own credentials) and the worker's limits, validated at start-up
//! naming the bad setting. A search names destinations; only these names are accepted, so
//! a caller can never make the coordinator send a request to an address of its choosing.

use std::{collections::BTreeMap, net::IpAddr, path::PathBuf, sync::Arc, time::Duration};

use clap::Args;
use lps_proto::model::DestinationName;
use reqwest::Url;

use crate::settings::ConfigError;

/// Attempts before a delivery is dead (`LPS_DELIVERY_MAX_ATTEMPTS`).
pub const DEFAULT_MAX_ATTEMPTS: u32 = 12;
/// Backoff after the first failed attempt, doubling per attempt (`LPS_DELIVERY_BACKOFF_BASE`).
pub const DEFAULT_BACKOFF_BASE: &str = "10s";
/// The longest backoff (`LPS_DELIVERY_BACKOFF_CAP`).
pub const DEFAULT_BACKOFF_CAP: &str = "1h";
/// One request's time limit, connect to last byte (`LPS_DELIVERY_TIMEOUT`).
pub const DEFAULT_TIMEOUT: &str = "10s";
/// Requests in flight at once per replica (`LPS_DELIVERY_CONCURRENCY`).
pub const DEFAULT_CONCURRENCY: u32 = 16;
/// How often an idle worker looks for due deliveries (`LPS_DELIVERY_POLL`).
pub const DEFAULT_POLL: &str = "1s";
/// Shortest signing secret accepted.
pub const MIN_SECRET_BYTES: usize = 16;

fn duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("{e} (write e.g. 30s, 5m)"))
}

#[derive(Debug, Clone, Args)]
pub struct DeliveryArgs {
    /// Delivery destinations searches may name: comma-separated `NAME=URL` (NAME: 1-64
    /// letters, digits, '.', '_', '-'). The URL must be https://, or http:// to a loopback
    /// host (or any host with LPS_DELIVERY_ALLOW_HTTP). A secret: URLs may carry credentials.
    #[arg(
        long,
        env = "LPS_DESTINATIONS",
        hide_env_values = true,
        value_delimiter = ','
    )]
    pub destinations: Vec<String>,
    /// Signing secrets of the destinations: comma-separated `NAME=SECRET` (at least 16
    /// bytes each). Every destination needs one, here or in LPS_DESTINATION_SECRETS_FILE.
    #[arg(
        long,
        env = "LPS_DESTINATION_SECRETS",
        hide_env_values = true,
        value_delimiter = ','
    )]
    pub destination_secrets: Vec<String>,
    /// A file of `NAME=SECRET` lines (blank lines and `#` comments skipped), e.g. a mounted
    /// Kubernetes Secret; adds to LPS_DESTINATION_SECRETS (a name in both is an error).
    #[arg(long, env = "LPS_DESTINATION_SECRETS_FILE")]
    pub destination_secrets_file: Option<PathBuf>,
    /// Allow plain http:// destinations on hosts other than loopback (tests and closed
    /// networks only: the payload and its signature travel unencrypted).
    #[arg(long, env = "LPS_DELIVERY_ALLOW_HTTP", default_value_t = false, action = clap::ArgAction::Set)]
    pub delivery_allow_http: bool,
    /// Attempts before a delivery is dead (an operator may retry it: lpsctl delivery retry).
    #[arg(long, env = "LPS_DELIVERY_MAX_ATTEMPTS", default_value_t = DEFAULT_MAX_ATTEMPTS)]
    pub delivery_max_attempts: u32,
    /// Backoff after a failed attempt: min(cap, base * 2^(attempts-1)), jittered to 50-100 %.
    #[arg(long, env = "LPS_DELIVERY_BACKOFF_BASE", default_value = DEFAULT_BACKOFF_BASE, value_parser = duration)]
    pub delivery_backoff_base: Duration,
    #[arg(long, env = "LPS_DELIVERY_BACKOFF_CAP", default_value = DEFAULT_BACKOFF_CAP, value_parser = duration)]
    pub delivery_backoff_cap: Duration,
    /// One request's time limit (connect to the last byte of the answer); a slower receiver
    /// is a failed attempt.
    #[arg(long, env = "LPS_DELIVERY_TIMEOUT", default_value = DEFAULT_TIMEOUT, value_parser = duration)]
    pub delivery_timeout: Duration,
    /// Delivery requests in flight at once on this replica.
    #[arg(long, env = "LPS_DELIVERY_CONCURRENCY", default_value_t = DEFAULT_CONCURRENCY)]
    pub delivery_concurrency: u32,
    /// How often an idle delivery worker looks for due deliveries (jittered).
    #[arg(long, env = "LPS_DELIVERY_POLL", default_value = DEFAULT_POLL, value_parser = duration)]
    pub delivery_poll: Duration,
}

/// A configured destination. `Debug` leaves out the URL and the secret.
#[derive(Clone)]
pub struct Destination {
    pub name: DestinationName,
    pub url: Url,
    secret: Arc<[u8]>,
}

impl Destination {
    /// The signing secret; empty for an alert webhook without one (posted unsigned).
    pub fn secret(&self) -> &[u8] {
        &self.secret
    }

    /// The alert webhook (`LPS_ALERT_WEBHOOK_URL`) as the destination of alert
    /// announcements ([`super::ALERT_DESTINATION`]): signed like any destination with
    /// `secret` (`LPS_ALERT_WEBHOOK_SECRET`), unsigned without one — a Slack incoming
    /// webhook checks no signature, and a webhook configured before alerts were signed
    /// keeps working.
    pub fn alert_webhook(url: Url, secret: Option<&str>) -> Self {
        Self {
            name: DestinationName::new(super::ALERT_DESTINATION)
                .expect("the alert destination's name is a valid name"),
            url,
            secret: Arc::from(secret.unwrap_or_default().as_bytes()),
        }
    }
}

impl std::fmt::Debug for Destination {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Destination")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// The configured destinations by name.
#[derive(Debug, Clone, Default)]
pub struct Destinations(BTreeMap<String, Destination>);

impl Destinations {
    pub fn get(&self, name: &str) -> Option<&Destination> {
        self.0.get(name)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }
}

/// The validated delivery settings.
#[derive(Debug, Clone)]
pub struct DeliveryConfig {
    pub destinations: Destinations,
    /// Where alert announcements go (`None`: no alert webhook; set by the composer from
    /// the alert settings).
    pub alert_webhook: Option<Destination>,
    pub max_attempts: u32,
    pub backoff_base: Duration,
    pub backoff_cap: Duration,
    pub timeout: Duration,
    pub concurrency: u32,
    pub poll: Duration,
}

fn bad(setting: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError {
        setting,
        reason: reason.into(),
    }
}

/// `NAME=VALUE` entries of `setting` (empty ones skipped); names checked, each once.
fn entries(setting: &'static str, raw: &[String]) -> Result<Vec<(String, String)>, ConfigError> {
    let mut out: Vec<(String, String)> = Vec::new();
    for entry in raw.iter().map(|e| e.trim()).filter(|e| !e.is_empty()) {
        let Some((name, value)) = entry.split_once('=') else {
            // NB: never echo the entry: it is a secret.
            return Err(bad(
                setting,
                format!("entry {} is not NAME=VALUE", out.len() + 1),
            ));
        };
        let name = DestinationName::new(name.trim())
            .map_err(|e| bad(setting, format!("{:?}: {}", name.trim(), e.reason)))?;
        if out.iter().any(|(n, _)| n == name.as_str()) {
            return Err(bad(setting, format!("{name} is given twice")));
        }
        out.push((name.to_string(), value.trim().to_owned()));
    }
    Ok(out)
}

fn is_loopback(url: &Url) -> bool {
    match url.host_str() {
        Some("localhost") => true,
        Some(host) => host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
            .is_ok_and(|ip| ip.is_loopback()),
        None => false,
    }
}

impl DeliveryArgs {
    pub fn validate(self) -> Result<DeliveryConfig, ConfigError> {
        const URLS: &str = "LPS_DESTINATIONS";
        const SECRETS: &str = "LPS_DESTINATION_SECRETS";
        const FILE: &str = "LPS_DESTINATION_SECRETS_FILE";
        let mut secrets = entries(SECRETS, &self.destination_secrets)?;
        if let Some(path) = self
            .destination_secrets_file
            .filter(|p| !p.as_os_str().is_empty())
        {
            let text = std::fs::read_to_string(&path)
                .map_err(|e| bad(FILE, format!("{}: {e}", path.display())))?;
            let lines: Vec<String> = text
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .map(str::to_owned)
                .collect();
            for (name, secret) in entries(FILE, &lines)? {
                if secrets.iter().any(|(n, _)| *n == name) {
                    return Err(bad(FILE, format!("{name} also has a secret in {SECRETS}")));
                }
                secrets.push((name, secret));
            }
        }
        let mut destinations = BTreeMap::new();
        for (name, raw_url) in entries(URLS, &self.destinations)? {
            let url =
                Url::parse(&raw_url).map_err(|e| bad(URLS, format!("{name}: not a URL ({e})")))?;
            match url.scheme() {
                "https" => {}
                "http" if is_loopback(&url) || self.delivery_allow_http => {}
                "http" => {
                    return Err(bad(
                        URLS,
                        format!(
                            "{name}: http:// only to a loopback host unless LPS_DELIVERY_ALLOW_HTTP=true; use https://"
                        ),
                    ));
                }
                other => {
                    return Err(bad(
                        URLS,
                        format!("{name}: scheme {other:?}, expected https://"),
                    ));
                }
            }
            if url.host_str().is_none_or(str::is_empty) {
                return Err(bad(URLS, format!("{name}: the URL has no host")));
            }
            let secret = secrets
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, s)| s.clone())
                .ok_or_else(|| {
                    bad(
                        SECRETS,
                        format!("destination {name} has no signing secret (here or in {FILE})"),
                    )
                })?;
            if secret.len() < MIN_SECRET_BYTES {
                return Err(bad(
                    SECRETS,
                    format!("the secret of {name} is shorter than {MIN_SECRET_BYTES} bytes"),
                ));
            }
            let name = DestinationName::new(name).map_err(|e| bad(URLS, e.reason))?;
            destinations.insert(
                name.to_string(),
                Destination {
                    name,
                    url,
                    secret: Arc::from(secret.into_bytes()),
                },
            );
        }
        if let Some((name, _)) = secrets.iter().find(|(n, _)| !destinations.contains_key(n)) {
            return Err(bad(
                SECRETS,
                format!("{name} has a secret but is not a destination in {URLS}"),
            ));
        }
        if !(1..=100).contains(&self.delivery_max_attempts) {
            return Err(bad("LPS_DELIVERY_MAX_ATTEMPTS", "must be 1..=100"));
        }
        if self.delivery_backoff_base.is_zero() {
            return Err(bad("LPS_DELIVERY_BACKOFF_BASE", "must be positive"));
        }
        if self.delivery_backoff_cap < self.delivery_backoff_base {
            return Err(bad(
                "LPS_DELIVERY_BACKOFF_CAP",
                "must not be below LPS_DELIVERY_BACKOFF_BASE",
            ));
        }
        if self.delivery_timeout < Duration::from_millis(100)
            || self.delivery_timeout > Duration::from_secs(300)
        {
            return Err(bad("LPS_DELIVERY_TIMEOUT", "must be 100ms..=5m"));
        }
        if !(1..=1000).contains(&self.delivery_concurrency) {
            return Err(bad("LPS_DELIVERY_CONCURRENCY", "must be 1..=1000"));
        }
        if self.delivery_poll < Duration::from_millis(10) {
            return Err(bad("LPS_DELIVERY_POLL", "must be at least 10ms"));
        }
        Ok(DeliveryConfig {
            destinations: Destinations(destinations),
            alert_webhook: None,
            max_attempts: self.delivery_max_attempts,
            backoff_base: self.delivery_backoff_base,
            backoff_cap: self.delivery_backoff_cap,
            timeout: self.delivery_timeout,
            concurrency: self.delivery_concurrency,
            poll: self.delivery_poll,
        })
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;

    #[derive(Debug, clap::Parser)]
    struct Cli {
        #[command(flatten)]
        delivery: DeliveryArgs,
    }

    fn validate(args: &[&str]) -> Result<DeliveryConfig, ConfigError> {
        let mut argv = vec!["coordinator"];
        argv.extend_from_slice(args);
        Cli::try_parse_from(argv).unwrap().delivery.validate()
    }

    const SECRET: &str = "orders=0123456789abcdef";

    #[test]
    fn destinations_need_https_or_loopback_and_a_secret() {
        let c = validate(&[
            "--destinations",
            "orders=https://hooks.example.com/lps?k=1",
            "--destination-secrets",
            SECRET,
        ])
        .unwrap();
        let d = c.destinations.get("orders").unwrap();
        assert_eq!(d.secret(), b"0123456789abcdef");
        assert!(
            !format!("{c:?}").contains("hooks.example.com"),
            "URLs stay out of Debug"
        );
        assert!(!format!("{c:?}").contains("0123456789abcdef"));
        for url in [
            "http://127.0.0.1:9/h",
            "http://localhost:9/h",
            "http://[::1]:9/h",
        ] {
            let dest = format!("orders={url}");
            assert!(
                validate(&["--destinations", &dest, "--destination-secrets", SECRET]).is_ok(),
                "{url}"
            );
        }
        let err = |args: &[&str]| validate(args).unwrap_err();
        let e = err(&[
            "--destinations",
            "orders=http://hooks.example.com/",
            "--destination-secrets",
            SECRET,
        ]);
        assert_eq!(e.setting, "LPS_DESTINATIONS");
        assert!(e.reason.contains("LPS_DELIVERY_ALLOW_HTTP"), "{e}");
        assert!(
            validate(&[
                "--destinations",
                "orders=http://hooks.example.com/",
                "--destination-secrets",
                SECRET,
                "--delivery-allow-http",
                "true"
            ])
            .is_ok()
        );
        assert_eq!(
            err(&["--destinations", "orders=ftp://x/"]).setting,
            "LPS_DESTINATIONS"
        );
        assert_eq!(
            err(&["--destinations", "orders=https://x/"]).setting,
            "LPS_DESTINATION_SECRETS"
        );
        let e = err(&[
            "--destinations",
            "orders=https://x/",
            "--destination-secrets",
            "orders=short",
        ]);
        assert!(e.reason.contains("shorter"), "{e}");
        let e = err(&["--destination-secrets", SECRET]);
        assert!(e.reason.contains("not a destination"), "{e}");
        let e = err(&["--destinations", "no-equals-sign"]);
        assert_eq!(e.setting, "LPS_DESTINATIONS");
        assert!(
            !e.reason.contains("no-equals-sign"),
            "entries are secrets: {e}"
        );
        assert_eq!(
            err(&[
                "--delivery-backoff-base",
                "10s",
                "--delivery-backoff-cap",
                "1s"
            ])
            .setting,
            "LPS_DELIVERY_BACKOFF_CAP"
        );
        assert_eq!(
            err(&["--delivery-concurrency", "0"]).setting,
            "LPS_DELIVERY_CONCURRENCY"
        );
    }

    #[test]
    fn secrets_come_from_a_file_too() {
        let dir = std::env::temp_dir().join(format!("lps-dest-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("secrets");
        std::fs::write(&file, "# destinations\n\norders=0123456789abcdef\n").unwrap();
        let c = validate(&[
            "--destinations",
            "orders=https://x/",
            "--destination-secrets-file",
            file.to_str().unwrap(),
        ])
        .unwrap();
        assert_eq!(
            c.destinations.get("orders").unwrap().secret(),
            b"0123456789abcdef"
        );
        let e = validate(&[
            "--destinations",
            "orders=https://x/",
            "--destination-secrets",
            SECRET,
            "--destination-secrets-file",
            file.to_str().unwrap(),
        ])
        .unwrap_err();
        assert_eq!(e.setting, "LPS_DESTINATION_SECRETS_FILE");
        let e = validate(&["--destination-secrets-file", "/nonexistent/lps"]).unwrap_err();
        assert_eq!(e.setting, "LPS_DESTINATION_SECRETS_FILE");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
