//! Proxy-ledger configuration: the gateway, its ports and credentials, and the rotation,
//! rest and cooldown rules. [`LedgerArgs`] is the clap side (every flag has an `LPS_…`
//! variable; the password only from the environment); [`LedgerArgs::validate`] turns it
//! into a [`LedgerConfig`] or a [`ConfigError`] naming the bad setting.
//!
//! NB: the password is a [`Secret`]: its `Debug` prints `***`, it has no `Display`, and it
//! is read only where a grant is built. It is never stored in PostgreSQL.

use std::{collections::BTreeMap, fmt, str::FromStr, time::Duration};

use clap::Args;
use lps_proto::model::MallId;

use crate::settings::{ConfigError, default_duration, duration};

/// The setting that lists the gateway's ports; named in every port-spec error.
pub const PORTS_SETTING: &str = "LPS_PROXY_PORTS";

// The ledger settings' defaults, once: the flags and [`LedgerConfig::new`] read these.
pub const DEFAULT_PROXY_LEASE_TTL: &str = "60s";
pub const DEFAULT_PROXY_REST: &str = "120s";
pub const DEFAULT_PROXY_BLOCK_COOLDOWN_BASE: &str = "60s";
pub const DEFAULT_PROXY_BLOCK_COOLDOWN_CAP: &str = "1h";
pub const DEFAULT_PROXY_ERROR_COOLDOWN: &str = "30s";
/// Default of [`LedgerConfig::burn_half_life`] (`LPS_PROXY_BURN_HALF_LIFE`).
pub const DEFAULT_PROXY_BURN_HALF_LIFE: &str = "6h";
pub const DEFAULT_IP_REQUEST_BUDGET: u32 = 3;
pub const DEFAULT_MAX_IP_BURNS_PER_JOB: u32 = 3;

/// A secret string (the gateway password). `Debug` prints `***`; there is no `Display`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(secret: impl Into<String>) -> Self {
        Self(secret.into())
    }

    /// The secret itself: only for handing to the node in a grant.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl FromStr for Secret {
    type Err = std::convert::Infallible;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Self::new(s))
    }
}

/// The gateway's ports, sorted and distinct. Parsed from `10000-10099` or
/// `10000,10002,10005-10007`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortSet(Vec<u16>);

impl PortSet {
    /// Parses a port spec; errors name [`PORTS_SETTING`].
    pub fn parse(spec: &str) -> Result<Self, ConfigError> {
        let bad = |reason: String| ConfigError {
            setting: PORTS_SETTING,
            reason,
        };
        let number = |s: &str| -> Result<u16, ConfigError> {
            let s = s.trim();
            match s.parse::<u32>() {
                Ok(n @ 1..=65535) => Ok(u16::try_from(n).unwrap_or(u16::MAX)),
                Ok(n) => Err(bad(format!("port {n} is outside 1..=65535"))),
                Err(_) => Err(bad(format!(
                    "{s:?} is not a port number (write e.g. 10000-10099 or 10000,10002,10005-10007)"
                ))),
            }
        };
        if spec.trim().is_empty() {
            return Err(bad(
                "no ports given (write e.g. 10000-10099 or 10000,10002,10005-10007)".into(),
            ));
        }
        let mut ports = Vec::new();
        for item in spec.split(',') {
            let item = item.trim();
            if item.is_empty() {
                return Err(bad(format!("empty item in {spec:?}")));
            }
            match item.split_once('-') {
                Some((lo, hi)) => {
                    let (lo, hi) = (number(lo)?, number(hi)?);
                    if lo > hi {
                        return Err(bad(format!("range {item:?} runs backwards")));
                    }
                    ports.extend(lo..=hi);
                }
                None => ports.push(number(item)?),
            }
        }
        ports.sort_unstable();
        if let Some(w) = ports.windows(2).find(|w| w[0] == w[1]) {
            return Err(bad(format!("port {} is listed twice", w[0])));
        }
        Ok(Self(ports))
    }

    /// Exactly these ports (tests, benchmarks). Sorted; duplicates removed.
    pub fn from_ports(ports: impl IntoIterator<Item = u16>) -> Self {
        let mut ports: Vec<u16> = ports.into_iter().filter(|p| *p > 0).collect();
        ports.sort_unstable();
        ports.dedup();
        Self(ports)
    }

    pub fn ports(&self) -> &[u16] {
        &self.0
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl FromStr for PortSet {
    type Err = ConfigError;

    fn from_str(s: &str) -> Result<Self, ConfigError> {
        Self::parse(s)
    }
}

/// How the ledger hands out and rests ports. [`LedgerConfig::new`] fills in the defaults.
#[derive(Debug, Clone)]
pub struct LedgerConfig {
    /// The gateway host every port belongs to.
    pub host: String,
    pub ports: PortSet,
    pub username: String,
    pub password: Secret,
    /// A grant lasts this long unless the node's heartbeats renew it.
    pub lease_ttl: Duration,
    /// How long a port rests after its per-IP request budget was used up.
    pub rest: Duration,
    /// Per-mall cooldown after a block: uniform in `[0, min(cap, base * 2^burns)]` (full
    /// jitter), `burns` being the port's blocks before this one.
    pub block_cooldown_base: Duration,
    pub block_cooldown_cap: Duration,
    /// Cooldown for every mall after a gateway (proxy) error.
    pub proxy_error_cooldown: Duration,
    /// Searches per IP before the node rotates, unless the mall has an override.
    pub request_budget: u32,
    pub mall_budgets: BTreeMap<MallId, u32>,
    /// A job blocked on more IPs than this is a page problem: it fails as `page_blocked`.
    pub max_ip_burns_per_job: u32,
    /// A port's burn count halves every this long since its last block, so an IP burned
    /// once last month is not cooled as if it were burned again and again today.
    pub burn_half_life: Duration,
}

impl LedgerConfig {
    /// A configuration with the default rules (the flags', `DEFAULT_*` above): lease 60 s,
    /// rest 120 s, block cooldown 60 s doubling per burn up to 1 h, proxy-error cooldown
    /// 30 s, 3 requests per IP, 3 IP burns per job.
    pub fn new(
        host: impl Into<String>,
        ports: PortSet,
        username: impl Into<String>,
        password: Secret,
    ) -> Self {
        Self {
            host: host.into(),
            ports,
            username: username.into(),
            password,
            lease_ttl: default_duration(DEFAULT_PROXY_LEASE_TTL),
            rest: default_duration(DEFAULT_PROXY_REST),
            block_cooldown_base: default_duration(DEFAULT_PROXY_BLOCK_COOLDOWN_BASE),
            block_cooldown_cap: default_duration(DEFAULT_PROXY_BLOCK_COOLDOWN_CAP),
            proxy_error_cooldown: default_duration(DEFAULT_PROXY_ERROR_COOLDOWN),
            request_budget: DEFAULT_IP_REQUEST_BUDGET,
            mall_budgets: BTreeMap::new(),
            max_ip_burns_per_job: DEFAULT_MAX_IP_BURNS_PER_JOB,
            burn_half_life: default_duration(DEFAULT_PROXY_BURN_HALF_LIFE),
        }
    }

    /// Adds the site profiles' own `ip_request_budget`s (0 = none) for the malls the
    /// operator named no budget for: `LPS_IP_REQUEST_BUDGETS` (the operator, per mall) wins
    /// over the profile (the mall's knowledge), which wins over `LPS_IP_REQUEST_BUDGET`
    /// (the deployment's default). Grants then carry the budget that applies (DESIGN §4).
    pub fn with_profile_budgets(
        mut self,
        budgets: impl IntoIterator<Item = (MallId, u32)>,
    ) -> Self {
        for (mall, budget) in budgets.into_iter().filter(|(_, b)| *b > 0) {
            self.mall_budgets.entry(mall).or_insert(budget);
        }
        self
    }

    /// The per-IP request budget for `mall`.
    pub fn budget_for(&self, mall: &MallId) -> u32 {
        self.mall_budgets
            .get(mall)
            .copied()
            .unwrap_or(self.request_budget)
    }
}

/// The proxy flags of the coordinator (flatten into its CLI). Without `LPS_PROXY_GATEWAY_HOST` the
/// ledger is off.
#[derive(Debug, Clone, Args)]
pub struct LedgerArgs {
    /// Proxy gateway host; unset: no proxy ledger.
    #[arg(long, env = "LPS_PROXY_GATEWAY_HOST")]
    pub proxy_gateway_host: Option<String>,
    /// Gateway ports, e.g. `10000-10099` or `10000,10002,10005-10007`.
    #[arg(long, env = "LPS_PROXY_PORTS")]
    pub proxy_ports: Option<String>,
    #[arg(long, env = "LPS_PROXY_USERNAME", default_value = "")]
    pub proxy_username: String,
    /// Gateway password: from the environment (or a secret file mounted as it) only.
    #[arg(
        long,
        env = "LPS_PROXY_PASSWORD",
        hide_env_values = true,
        default_value = ""
    )]
    pub proxy_password: Secret,
    #[arg(long, env = "LPS_PROXY_LEASE_TTL", default_value = DEFAULT_PROXY_LEASE_TTL, value_parser = duration)]
    pub proxy_lease_ttl: Duration,
    /// Rest after the per-IP request budget.
    #[arg(long, env = "LPS_PROXY_REST", default_value = DEFAULT_PROXY_REST, value_parser = duration)]
    pub proxy_rest: Duration,
    #[arg(long, env = "LPS_PROXY_BLOCK_COOLDOWN_BASE", default_value = DEFAULT_PROXY_BLOCK_COOLDOWN_BASE, value_parser = duration)]
    pub proxy_block_cooldown_base: Duration,
    #[arg(long, env = "LPS_PROXY_BLOCK_COOLDOWN_CAP", default_value = DEFAULT_PROXY_BLOCK_COOLDOWN_CAP, value_parser = duration)]
    pub proxy_block_cooldown_cap: Duration,
    #[arg(long, env = "LPS_PROXY_ERROR_COOLDOWN", default_value = DEFAULT_PROXY_ERROR_COOLDOWN, value_parser = duration)]
    pub proxy_error_cooldown: Duration,
    /// Searches per IP before rotating.
    #[arg(long, env = "LPS_IP_REQUEST_BUDGET", default_value_t = DEFAULT_IP_REQUEST_BUDGET)]
    pub ip_request_budget: u32,
    /// Per-mall budgets, e.g. `naver=2,coupang=4`.
    #[arg(long, env = "LPS_IP_REQUEST_BUDGETS", default_value = "")]
    pub ip_request_budgets: String,
    #[arg(long, env = "LPS_MAX_IP_BURNS_PER_JOB", default_value_t = DEFAULT_MAX_IP_BURNS_PER_JOB)]
    pub max_ip_burns_per_job: u32,
    /// A port's burn count (what lengthens its block cooldowns) halves every this long
    /// since its last block (1m..=365d).
    #[arg(long, env = "LPS_PROXY_BURN_HALF_LIFE", default_value = DEFAULT_PROXY_BURN_HALF_LIFE, value_parser = duration)]
    pub proxy_burn_half_life: Duration,
}

impl LedgerArgs {
    /// The validated configuration, or `None` when no proxy host is set.
    pub fn validate(self) -> Result<Option<LedgerConfig>, ConfigError> {
        let bad = |setting: &'static str, reason: &str| ConfigError {
            setting,
            reason: reason.to_owned(),
        };
        let Some(host) = self.proxy_gateway_host.filter(|h| !h.trim().is_empty()) else {
            return Ok(None);
        };
        let host = host.trim().to_owned();
        if host.len() > 253 || host.contains(['/', ' ', '@']) {
            return Err(bad(
                "LPS_PROXY_GATEWAY_HOST",
                "must be a host name or address",
            ));
        }
        let ports = PortSet::parse(self.proxy_ports.as_deref().unwrap_or(""))?;
        if self.proxy_lease_ttl < Duration::from_secs(1)
            || self.proxy_lease_ttl > Duration::from_secs(3600)
        {
            return Err(bad("LPS_PROXY_LEASE_TTL", "must be 1s..=1h"));
        }
        if self.proxy_block_cooldown_base.is_zero() {
            return Err(bad("LPS_PROXY_BLOCK_COOLDOWN_BASE", "must be positive"));
        }
        if self.proxy_block_cooldown_cap < self.proxy_block_cooldown_base {
            return Err(bad(
                "LPS_PROXY_BLOCK_COOLDOWN_CAP",
                "must not be below LPS_PROXY_BLOCK_COOLDOWN_BASE",
            ));
        }
        for (setting, d) in [
            ("LPS_PROXY_REST", self.proxy_rest),
            (
                "LPS_PROXY_BLOCK_COOLDOWN_CAP",
                self.proxy_block_cooldown_cap,
            ),
            ("LPS_PROXY_ERROR_COOLDOWN", self.proxy_error_cooldown),
        ] {
            if d > Duration::from_secs(7 * 86_400) {
                return Err(bad(setting, "must be at most 7 days"));
            }
        }
        if !(1..=1000).contains(&self.ip_request_budget) {
            return Err(bad("LPS_IP_REQUEST_BUDGET", "must be 1..=1000"));
        }
        let mut mall_budgets = BTreeMap::new();
        for item in self
            .ip_request_budgets
            .split(',')
            .map(str::trim)
            .filter(|i| !i.is_empty())
        {
            let (mall, budget) = item.split_once('=').ok_or_else(|| {
                bad(
                    "LPS_IP_REQUEST_BUDGETS",
                    "write mall=budget pairs, e.g. naver=2,coupang=4",
                )
            })?;
            let mall = MallId::new(mall.trim())
                .map_err(|e| bad("LPS_IP_REQUEST_BUDGETS", &e.to_string()))?;
            let budget = budget
                .trim()
                .parse::<u32>()
                .ok()
                .filter(|b| (1..=1000).contains(b))
                .ok_or_else(|| bad("LPS_IP_REQUEST_BUDGETS", "budgets must be 1..=1000"))?;
            if mall_budgets.insert(mall, budget).is_some() {
                return Err(bad("LPS_IP_REQUEST_BUDGETS", "a mall is listed twice"));
            }
        }
        if !(1..=100).contains(&self.max_ip_burns_per_job) {
            return Err(bad("LPS_MAX_IP_BURNS_PER_JOB", "must be 1..=100"));
        }
        if self.proxy_burn_half_life < Duration::from_secs(60)
            || self.proxy_burn_half_life > Duration::from_secs(365 * 86_400)
        {
            return Err(bad("LPS_PROXY_BURN_HALF_LIFE", "must be 1m..=365d"));
        }
        Ok(Some(LedgerConfig {
            host,
            ports,
            username: self.proxy_username,
            password: self.proxy_password,
            lease_ttl: self.proxy_lease_ttl,
            rest: self.proxy_rest,
            block_cooldown_base: self.proxy_block_cooldown_base,
            block_cooldown_cap: self.proxy_block_cooldown_cap,
            proxy_error_cooldown: self.proxy_error_cooldown,
            request_budget: self.ip_request_budget,
            mall_budgets,
            max_ip_burns_per_job: self.max_ip_burns_per_job,
            burn_half_life: self.proxy_burn_half_life,
        }))
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        ledger: LedgerArgs,
    }

    #[test]
    fn a_profiles_budget_applies_unless_the_operator_named_one() {
        let mall = |m: &str| MallId::new(m).unwrap();
        let mut cfg = LedgerConfig::new("gw", PortSet::parse("1").unwrap(), "u", Secret::new("p"));
        cfg.mall_budgets.insert(mall("naver"), 2);
        let cfg = cfg.with_profile_budgets([
            (mall("naver"), 5),
            (mall("coupang"), 6),
            (mall("testmall-alpha"), 0),
        ]);
        assert_eq!(
            cfg.budget_for(&mall("naver")),
            2,
            "the operator's per-mall budget wins"
        );
        assert_eq!(
            cfg.budget_for(&mall("coupang")),
            6,
            "the profile's own budget"
        );
        assert_eq!(
            cfg.budget_for(&mall("testmall-alpha")),
            DEFAULT_IP_REQUEST_BUDGET,
            "0 = the deployment's"
        );
    }

    fn args(argv: &[&str]) -> LedgerArgs {
        let mut all = vec!["coordinator"];
        all.extend_from_slice(argv);
        Cli::try_parse_from(all).unwrap().ledger
    }

    #[test]
    fn a_bad_burn_half_life_names_the_setting() {
        let base = ["--proxy-gateway-host", "gw", "--proxy-ports", "1"];
        let with = |v: &str| {
            let mut a = base.to_vec();
            a.extend(["--proxy-burn-half-life", v]);
            args(&a).validate()
        };
        assert_eq!(
            with("6h").unwrap().unwrap().burn_half_life,
            Duration::from_secs(6 * 3600)
        );
        for bad in ["30s", "400d"] {
            let err = with(bad).unwrap_err();
            assert_eq!(err.setting, "LPS_PROXY_BURN_HALF_LIFE", "{bad}");
        }
        assert_eq!(
            args(&base).validate().unwrap().unwrap().burn_half_life,
            default_duration(DEFAULT_PROXY_BURN_HALF_LIFE)
        );
    }

    #[test]
    fn port_specs_parse() {
        assert_eq!(PortSet::parse("10000-10099").unwrap().len(), 100);
        assert_eq!(
            PortSet::parse("10000,10002,10005-10007").unwrap().ports(),
            [10000, 10002, 10005, 10006, 10007]
        );
        assert_eq!(PortSet::parse(" 7 , 5-6 ").unwrap().ports(), [5, 6, 7]);
        assert_eq!(PortSet::parse("1-1").unwrap().ports(), [1]);
    }

    #[test]
    fn bad_port_specs_name_the_setting() {
        for spec in [
            "",
            " ",
            "abc",
            "10-5",
            "0",
            "70000",
            "1,,2",
            "1-2,2",
            "1-",
            "-5",
            "1-2-3",
            "10000;10001",
        ] {
            let e = PortSet::parse(spec).unwrap_err();
            assert_eq!(e.setting, PORTS_SETTING, "{spec:?}");
            assert!(e.to_string().contains("LPS_PROXY_PORTS"), "{spec:?}: {e}");
        }
    }

    #[test]
    fn args_validate() {
        assert!(args(&[]).validate().unwrap().is_none());
        let c = args(&[
            "--proxy-gateway-host",
            "gw.example",
            "--proxy-ports",
            "10000-10009",
            "--proxy-password",
            "hunter2-secret",
            "--ip-request-budgets",
            "naver=2, coupang=4",
        ])
        .validate()
        .unwrap()
        .unwrap();
        assert_eq!(c.ports.len(), 10);
        assert_eq!(c.budget_for(&MallId::new("naver").unwrap()), 2);
        assert_eq!(c.budget_for(&MallId::new("other").unwrap()), 3);
        assert_eq!(c.lease_ttl, Duration::from_secs(60));
        assert!(!format!("{c:?}").contains("hunter2"));

        let e = args(&["--proxy-gateway-host", "gw", "--proxy-ports", "5-1"])
            .validate()
            .unwrap_err();
        assert_eq!(e.setting, "LPS_PROXY_PORTS");
        let e = args(&["--proxy-gateway-host", "gw"])
            .validate()
            .unwrap_err();
        assert_eq!(e.setting, "LPS_PROXY_PORTS");
        let e = args(&[
            "--proxy-gateway-host",
            "gw",
            "--proxy-ports",
            "1",
            "--ip-request-budgets",
            "Naver=2",
        ])
        .validate()
        .unwrap_err();
        assert_eq!(e.setting, "LPS_IP_REQUEST_BUDGETS");
        let e = args(&[
            "--proxy-gateway-host",
            "gw",
            "--proxy-ports",
            "1",
            "--proxy-block-cooldown-cap",
            "10s",
        ])
        .validate()
        .unwrap_err();
        assert_eq!(e.setting, "LPS_PROXY_BLOCK_COOLDOWN_CAP");
    }
}
