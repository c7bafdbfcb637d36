//! The fake proxy gateway: K loopback ports, each an HTTP forward proxy standing for one
//! sticky exit IP, like a residential-proxy provider's gateway.
//!
//! Each port (labelled `exit-01` … `exit-K`; labels, never real IP addresses):
//! - accepts absolute-form requests (`GET http://127.0.0.1:PORT/search?… HTTP/1.1`, what
//!   Chromium sends for `http://` URLs through a proxy) and `CONNECT host:port` tunnels,
//!   with client keep-alive;
//! - requires `Proxy-Authorization: Basic base64(user:pass)` when credentials are
//!   configured (407 + `Proxy-Authenticate: Basic realm="lps-gateway"` otherwise);
//! - refuses with 403 and an RFC 9209 `Proxy-Status: lps-gateway;
//!   error=destination_ip_prohibited` every target not in the allow-list (Chromium's
//!   background calls to Google hosts included), and answers 400 to requests that are not
//!   proxy requests;
//! - adds `X-Lps-Exit-Ip: <label>` ([`crate::EXIT_IP_HEADER`]) to forwarded requests so the
//!   mall can count and block per exit IP (tunnels are opaque and carry no header);
//! - counts connections, requests, refusals and bytes both ways ([`PortStats`]).
//!
//! Invariant: the gateway only ever connects to allow-listed loopback addresses; the list
//! is validated at start (non-loopback entries are an error) and no name is resolved
//! through DNS. The ports themselves bind loopback addresses only.
//!
//! Shutdown: stop accepting, let in-flight requests finish and close tunnels, then after
//! [`SHUTDOWN_GRACE`] drop whatever is left.

mod counting;
mod proxy;
mod stats;
mod target;

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::{CancellationToken, DropGuard};
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use crate::gateway::proxy::{Policy, PortCtx};
use crate::gateway::stats::PortCounters;
use crate::gateway::target::AllowList;

pub use proxy::PROXY_REALM;
pub use stats::PortStats;

/// How long [`GatewayHandle::shutdown`] lets in-flight requests finish.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Most ports one gateway may open.
pub const MAX_PORTS: usize = 1024;

/// Errors configuring or starting the gateway.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// `ports` is 0 or above [`MAX_PORTS`].
    #[error("gateway needs 1..={MAX_PORTS} ports, got {0}")]
    PortCount(usize),
    /// An allow-list entry is not `ip:port` / `localhost:port` / `[v6]:port`.
    #[error("allow-list entry {0:?} is not host:port with an IP literal or localhost")]
    BadAllowEntry(String),
    /// An allow-list entry or the listen address is not loopback.
    #[error("{0:?} is not a loopback address; the gateway never leaves this machine")]
    NotLoopback(String),
    /// A password was given without a user name or the other way round, or is empty.
    #[error("credentials must have a non-empty user name and password")]
    Credentials,
    /// `listen_base` port + ports overflows the port range.
    #[error("base port {base} + {ports} ports exceeds 65535")]
    PortRange {
        /// The base port.
        base: u16,
        /// How many ports were asked for.
        ports: usize,
    },
    /// A port could not be bound.
    #[error("cannot bind gateway port {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// The underlying error.
        source: std::io::Error,
    },
}

/// What to start.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    /// Number of ports (exit IPs), K.
    pub ports: usize,
    /// Where to bind: IP (loopback) and base port; port `p > 0` binds `p, p+1, …, p+K-1`,
    /// port 0 binds K free ports.
    pub listen_base: SocketAddr,
    /// Proxy user name; `None` disables authentication (Chromium cannot send proxy
    /// credentials given on its command line).
    pub username: Option<String>,
    /// Proxy password (ignored without a user name).
    pub password: String,
    /// Allowed targets, `host:port` with an IP literal or `localhost`; all loopback.
    pub allowed: Vec<String>,
}

impl GatewayConfig {
    /// K ports on free loopback ports, no authentication, nothing allowed yet.
    pub fn new(ports: usize) -> GatewayConfig {
        GatewayConfig {
            ports,
            listen_base: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            username: None,
            password: String::new(),
            allowed: Vec::new(),
        }
    }

    /// Requires `Proxy-Authorization: Basic base64(user:password)`.
    pub fn with_credentials(
        mut self,
        user: impl Into<String>,
        password: impl Into<String>,
    ) -> GatewayConfig {
        self.username = Some(user.into());
        self.password = password.into();
        self
    }

    /// Allows one target (`SocketAddr`, or a `host:port` string).
    pub fn allow(mut self, target: impl ToString) -> GatewayConfig {
        self.allowed.push(target.to_string());
        self
    }

    /// Sets the listen address (see [`GatewayConfig::listen_base`]).
    pub fn with_listen_base(mut self, listen_base: SocketAddr) -> GatewayConfig {
        self.listen_base = listen_base;
        self
    }

    fn policy(&self) -> Result<Policy, GatewayError> {
        let credentials = match &self.username {
            None => None,
            Some(user) if user.is_empty() || user.contains(':') || self.password.is_empty() => {
                return Err(GatewayError::Credentials);
            }
            Some(user) => Some(format!("{user}:{}", self.password)),
        };
        Ok(Policy {
            credentials,
            allowed: AllowList::parse(&self.allowed)?,
        })
    }

    fn port_addrs(&self) -> Result<Vec<SocketAddr>, GatewayError> {
        if self.ports == 0 || self.ports > MAX_PORTS {
            return Err(GatewayError::PortCount(self.ports));
        }
        if !self.listen_base.ip().is_loopback() {
            return Err(GatewayError::NotLoopback(self.listen_base.to_string()));
        }
        let ip = self.listen_base.ip();
        let base = self.listen_base.port();
        if base == 0 {
            return Ok(vec![SocketAddr::new(ip, 0); self.ports]);
        }
        (0..self.ports)
            .map(|i| {
                u16::try_from(i)
                    .ok()
                    .and_then(|i| base.checked_add(i))
                    .map(|port| SocketAddr::new(ip, port))
                    .ok_or(GatewayError::PortRange {
                        base,
                        ports: self.ports,
                    })
            })
            .collect()
    }
}

/// The label of port `index` (0-based) out of `count`: `exit-01`, … (wider for K ≥ 100).
pub fn exit_label(index: usize, count: usize) -> String {
    let width = count.to_string().len().max(2);
    format!("exit-{:0width$}", index + 1)
}

/// One bound port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortInfo {
    /// Exit IP label, e.g. `exit-01`.
    pub label: String,
    /// Bound address.
    pub addr: SocketAddr,
}

impl PortInfo {
    /// `http://127.0.0.1:PORT`, for `--proxy-server` and friends.
    pub fn proxy_url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

/// Entry point: `Gateway::start(config)`.
#[derive(Debug, Clone, Copy)]
pub struct Gateway;

impl Gateway {
    /// Validates the config, binds all ports and serves until
    /// [`GatewayHandle::shutdown`] (or until the handle is dropped).
    pub async fn start(config: GatewayConfig) -> Result<GatewayHandle, GatewayError> {
        let policy = Arc::new(config.policy()?);
        let listeners = bind_all(&config.port_addrs()?).await?;
        let graceful = CancellationToken::new();
        let abort = CancellationToken::new();
        let tasks = TaskTracker::new();
        let mut ports = Vec::with_capacity(listeners.len());
        for (index, (listener, addr)) in listeners.into_iter().enumerate() {
            let ctx = Arc::new(PortCtx {
                label: exit_label(index, config.ports),
                counters: Arc::new(PortCounters::default()),
                policy: Arc::clone(&policy),
                tasks: tasks.clone(),
                graceful: graceful.clone(),
                abort: abort.clone(),
            });
            let span = tracing::info_span!("gateway.port", gateway.port = %ctx.label, gateway.addr = %addr);
            tasks.spawn(accept_loop(listener, Arc::clone(&ctx)).instrument(span));
            ports.push((
                PortInfo {
                    label: ctx.label.clone(),
                    addr,
                },
                ctx,
            ));
        }
        tracing::info!(
            ports = ports.len(),
            allowed = ?policy.allowed.addrs(),
            auth = policy.credentials.is_some(),
            "gateway listening"
        );
        Ok(GatewayHandle {
            ports,
            tasks,
            _stop_on_drop: (graceful.clone().drop_guard(), abort.clone().drop_guard()),
            graceful,
            abort,
        })
    }
}

async fn bind_all(addrs: &[SocketAddr]) -> Result<Vec<(TcpListener, SocketAddr)>, GatewayError> {
    let mut listeners = Vec::with_capacity(addrs.len());
    for &addr in addrs {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| GatewayError::Bind { addr, source })?;
        let bound = listener
            .local_addr()
            .map_err(|source| GatewayError::Bind { addr, source })?;
        listeners.push((listener, bound));
    }
    Ok(listeners)
}

async fn accept_loop(listener: TcpListener, ctx: Arc<PortCtx>) {
    loop {
        let accepted = tokio::select! {
            () = ctx.graceful.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, _peer)) => proxy::spawn_connection(&ctx, stream),
            Err(error) => {
                // NB: accept errors (e.g. EMFILE) are transient; back off instead of spinning.
                tracing::warn!(%error, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// A running gateway. Dropping it stops all ports (without waiting); prefer
/// [`GatewayHandle::shutdown`].
#[derive(Debug)]
pub struct GatewayHandle {
    ports: Vec<(PortInfo, Arc<PortCtx>)>,
    tasks: TaskTracker,
    graceful: CancellationToken,
    abort: CancellationToken,
    _stop_on_drop: (DropGuard, DropGuard),
}

impl GatewayHandle {
    /// All ports, in label order.
    pub fn ports(&self) -> Vec<PortInfo> {
        self.ports.iter().map(|(info, _)| info.clone()).collect()
    }

    /// The port with this label.
    pub fn port(&self, label: &str) -> Option<PortInfo> {
        self.ports
            .iter()
            .find(|(info, _)| info.label == label)
            .map(|(info, _)| info.clone())
    }

    /// Counters of every port, in label order.
    pub fn stats(&self) -> Vec<PortStats> {
        self.ports
            .iter()
            .map(|(info, ctx)| ctx.counters.snapshot(&info.label, info.addr))
            .collect()
    }

    /// Counters of the port with this label.
    pub fn port_stats(&self, label: &str) -> Option<PortStats> {
        self.stats().into_iter().find(|s| s.label == label)
    }

    /// Stops accepting, lets in-flight requests finish for up to [`SHUTDOWN_GRACE`] (tunnels
    /// are closed at once), then drops what is left.
    pub async fn shutdown(self) {
        self.graceful.cancel();
        self.tasks.close();
        if tokio::time::timeout(SHUTDOWN_GRACE, self.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!("gateway shutdown grace elapsed, aborting connections");
            self.abort.cancel();
            self.tasks.wait().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOOPBACK: Ipv4Addr = Ipv4Addr::LOCALHOST;

    #[test]
    fn labels_are_padded() {
        assert_eq!(exit_label(0, 8), "exit-01");
        assert_eq!(exit_label(9, 10), "exit-10");
        assert_eq!(exit_label(4, 150), "exit-005");
    }

    #[test]
    fn validates_config() {
        assert!(matches!(
            GatewayConfig::new(0).port_addrs(),
            Err(GatewayError::PortCount(0))
        ));
        let public = GatewayConfig::new(1).with_listen_base(SocketAddr::from(([0, 0, 0, 0], 0)));
        assert!(matches!(
            public.port_addrs(),
            Err(GatewayError::NotLoopback(_))
        ));
        let high = GatewayConfig::new(3).with_listen_base(SocketAddr::from((LOOPBACK, 65534)));
        assert!(matches!(
            high.port_addrs(),
            Err(GatewayError::PortRange { .. })
        ));
        let based = GatewayConfig::new(2).with_listen_base(SocketAddr::from((LOOPBACK, 4000)));
        assert_eq!(
            based.port_addrs().expect("addrs"),
            [
                SocketAddr::from((LOOPBACK, 4000)),
                SocketAddr::from((LOOPBACK, 4001))
            ]
        );
        assert!(matches!(
            GatewayConfig::new(1).with_credentials("u", "").policy(),
            Err(GatewayError::Credentials)
        ));
    }
}
