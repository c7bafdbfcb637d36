//! The local proxy relay: one per browser, on `127.0.0.1:<port>`, between Chromium and the
//! proxy gateway port of the browser's current IP session.
//!
//! Chromium is started with `--proxy-server=http://127.0.0.1:<relay>` once, for its whole
//! life; the relay forwards to whatever upstream it is pointed at and adds
//! `Proxy-Authorization: Basic …` itself, so gateway credentials never appear on a command
//! line (where any process on the host could read them) and a browser can change IP
//! without a restart. It speaks what Chromium sends a proxy: absolute-form requests
//! (`GET http://mall/search?… HTTP/1.1`, forwarded over one kept-alive upstream connection
//! per browser connection) and `CONNECT host:port` tunnels (for `https://`).
//!
//! Invariants:
//! - every browser connection is bound to the upstream current when it was accepted;
//!   [`Relay::point_to`] closes all of them (and their upstream connections and tunnels),
//!   so after a rotation no byte of the browser goes out through the old IP;
//! - with no upstream set, every request is answered `502` and nothing leaves the host;
//! - bytes are counted on the browser side of the relay, both ways, for every connection
//!   ([`Relay::counters`]): the executor meters a job as the difference of two snapshots;
//! - credentials live only in a sensitive header value inside [`Upstream`], whose `Debug`
//!   shows host and port only;
//! - a target the gateway itself refuses ([`Refusal`]: a CONNECT answered with anything but
//!   2xx or 407, or a forwarded request answered with an RFC 9209 `Proxy-Status` error) is
//!   remembered per host and answered with the relay's own error page, so a page reader
//!   never mistakes the gateway's 403 for the mall's bot block.
//!
//! Cancellation: [`Relay::stop`] ends the accept loop and every connection task. Dropping
//! a [`Relay`] does the same without waiting.

use std::{
    convert::Infallible,
    fmt, io,
    net::SocketAddr,
    pin::Pin,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    task::{Context, Poll},
    time::Duration,
};

use axum::body::Body;
use base64::Engine as _;
use hyper::{
    Method, Request, Response, StatusCode,
    body::Incoming,
    client::conn::http1::SendRequest,
    header::{self, HeaderValue},
    server::conn::http1,
    service::service_fn,
};
use hyper_util::rt::TokioIo;
use tokio::{
    io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _, ReadBuf},
    net::{TcpListener, TcpStream},
    task::JoinHandle,
};
use tokio_util::sync::{CancellationToken, DropGuard};
use tracing::{Instrument as _, debug, debug_span, warn};

/// Most target hosts whose refusals a relay remembers (Chromium's background calls to
/// hosts the gateway does not serve are refused too).
const MAX_REFUSED_HOSTS: usize = 64;

/// The gateway's own refusal of a target host: its status and what it said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: u16,
    /// The `Proxy-Status` error (and details), or the start of the CONNECT answer's reason.
    pub detail: String,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.detail.as_str() {
            "" => write!(f, "HTTP {}", self.status),
            detail => write!(f, "HTTP {}: {detail}", self.status),
        }
    }
}

/// Connecting to the gateway must succeed within this.
const UPSTREAM_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest CONNECT answer head read from the gateway.
const MAX_CONNECT_HEAD: usize = 16 * 1024;

/// A gateway port to relay to, with its credentials. `Debug` never shows them.
#[derive(Clone)]
pub struct Upstream {
    host: String,
    port: u16,
    auth: Option<HeaderValue>,
}

impl Upstream {
    /// `host:port`, with `Proxy-Authorization: Basic base64(username:password)` when a user
    /// name is given.
    pub fn new(host: impl Into<String>, port: u16, username: &str, password: &str) -> Self {
        let auth = (!username.is_empty()).then(|| {
            let token =
                base64::engine::general_purpose::STANDARD.encode(format!("{username}:{password}"));
            let mut value = HeaderValue::from_str(&format!("Basic {token}"))
                .unwrap_or_else(|_| HeaderValue::from_static(""));
            value.set_sensitive(true);
            value
        });
        Self {
            host: host.into(),
            port,
            auth,
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    async fn connect(&self) -> io::Result<TcpStream> {
        let connect = TcpStream::connect((self.host.as_str(), self.port));
        let stream = tokio::time::timeout(UPSTREAM_CONNECT_TIMEOUT, connect)
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "gateway connect timed out"))??;
        let _ = stream.set_nodelay(true);
        Ok(stream)
    }
}

impl fmt::Debug for Upstream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Upstream")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("auth", &self.auth.as_ref().map(|_| "***"))
            .finish()
    }
}

/// Bytes through the relay since it started, on the browser side.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RelayCounters {
    /// Bytes sent to the browser (responses): what the job downloaded.
    pub to_browser: u64,
    /// Bytes received from the browser (requests).
    pub from_browser: u64,
    /// Times the gateway could not be reached or refused the relay (connect errors, a
    /// broken connection, `407`); a CONNECT the gateway refuses for its target is not one.
    pub upstream_errors: u64,
}

impl RelayCounters {
    /// What happened between `earlier` and `self`.
    pub fn since(self, earlier: RelayCounters) -> RelayCounters {
        RelayCounters {
            to_browser: self.to_browser.saturating_sub(earlier.to_browser),
            from_browser: self.from_browser.saturating_sub(earlier.from_browser),
            upstream_errors: self.upstream_errors.saturating_sub(earlier.upstream_errors),
        }
    }

    pub fn bytes(self) -> u64 {
        self.to_browser.saturating_add(self.from_browser)
    }
}

#[derive(Debug, Default)]
struct Counters {
    to_browser: AtomicU64,
    from_browser: AtomicU64,
    upstream_errors: AtomicU64,
}

/// The upstream of one generation and the token that ends its connections.
#[derive(Debug)]
struct Current {
    upstream: Option<Arc<Upstream>>,
    generation: CancellationToken,
}

#[derive(Debug)]
struct Shared {
    current: Mutex<Current>,
    counters: Counters,
    /// By target host (lowercase, no port).
    refused: Mutex<std::collections::HashMap<String, Refusal>>,
}

impl Shared {
    fn current(&self) -> (Option<Arc<Upstream>>, CancellationToken) {
        let current = self
            .current
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        (current.upstream.clone(), current.generation.clone())
    }

    fn upstream_error(&self) {
        self.counters
            .upstream_errors
            .fetch_add(1, Ordering::Relaxed);
    }

    fn refused(&self, authority: &str, refusal: Refusal) {
        debug!(target = %authority, %refusal, "the gateway refused this target");
        let mut refused = self
            .refused
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if refused.len() >= MAX_REFUSED_HOSTS {
            refused.clear();
        }
        refused.insert(host_of(authority), refusal);
    }
}

/// `host` of `host:port` (or of a bare host), lowercase; IPv6 brackets kept.
fn host_of(authority: &str) -> String {
    let host = match authority.rsplit_once(':') {
        Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) && !host.ends_with(':') => {
            host
        }
        _ => authority,
    };
    host.to_ascii_lowercase()
}

/// The error an RFC 9209 `Proxy-Status` header reports (`gw; error=destination_ip_prohibited;
/// details="…"`), if it reports one: the gateway answered for itself, not for the target.
fn proxy_status_error(headers: &hyper::HeaderMap) -> Option<String> {
    let value = headers.get("proxy-status")?.to_str().ok()?;
    let params: Vec<&str> = value.split(';').map(str::trim).collect();
    let error = params.iter().find_map(|p| p.strip_prefix("error="))?;
    let details = params
        .iter()
        .find_map(|p| p.strip_prefix("details="))
        .map(|d| d.trim_matches('"'));
    let mut text: String = error.chars().take(64).collect();
    if let Some(details) = details.filter(|d| !d.is_empty()) {
        text.push_str(" (");
        text.extend(details.chars().take(120));
        text.push(')');
    }
    Some(text)
}

/// A running relay (see the module docs).
#[derive(Debug)]
pub struct Relay {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: CancellationToken,
    task: Option<JoinHandle<()>>,
    _stop_on_drop: DropGuard,
}

impl Relay {
    /// Binds a free loopback port and starts relaying (to nothing until
    /// [`Relay::point_to`]).
    pub async fn start() -> io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let stop = CancellationToken::new();
        let shared = Arc::new(Shared {
            current: Mutex::new(Current {
                upstream: None,
                generation: stop.child_token(),
            }),
            counters: Counters::default(),
            refused: Mutex::default(),
        });
        let task = tokio::spawn(
            accept_loop(listener, shared.clone(), stop.clone()).instrument(
                debug_span!(parent: None, "browser.relay", relay.addr = %addr, log_only = true),
            ),
        );
        Ok(Self {
            addr,
            shared,
            _stop_on_drop: stop.clone().drop_guard(),
            stop,
            task: Some(task),
        })
    }

    /// Where the browser sends its proxy traffic.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Relays new connections to `upstream` (none: refuse) and closes every current
    /// connection, so nothing more leaves through the previous upstream.
    pub fn point_to(&self, upstream: Option<Upstream>) {
        let mut current = self
            .shared
            .current
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        current.generation.cancel();
        current.generation = self.stop.child_token();
        debug!(upstream = ?upstream, "relay re-pointed");
        current.upstream = upstream.map(Arc::new);
    }

    /// Bytes and errors so far.
    pub fn counters(&self) -> RelayCounters {
        let c = &self.shared.counters;
        RelayCounters {
            to_browser: c.to_browser.load(Ordering::Relaxed),
            from_browser: c.from_browser.load(Ordering::Relaxed),
            upstream_errors: c.upstream_errors.load(Ordering::Relaxed),
        }
    }

    /// What the gateway said when it refused `host` itself, if it did (since the relay
    /// started; a later success does not erase it, a host keeps its last refusal).
    pub fn refusal(&self, host: &str) -> Option<Refusal> {
        self.shared
            .refused
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&host_of(host))
            .cloned()
    }

    /// Forgets `host`'s refusal (before a page load whose outcome should decide afresh).
    pub fn forget_refusal(&self, host: &str) {
        self.shared
            .refused
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&host_of(host));
    }

    /// Stops accepting and ends every connection.
    pub async fn stop(mut self) {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>, stop: CancellationToken) {
    loop {
        let accepted = tokio::select! {
            () = stop.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, _)) => {
                let _ = stream.set_nodelay(true);
                let (upstream, generation) = shared.current();
                tokio::spawn(
                    serve_browser(stream, upstream, generation, shared.clone())
                        .instrument(tracing::Span::current()),
                );
            }
            Err(err) => {
                // NB: transient (EMFILE and the like); back off instead of spinning.
                warn!(error = %err, "relay accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// One browser connection, bound to `upstream` until `generation` ends.
async fn serve_browser(
    stream: TcpStream,
    upstream: Option<Arc<Upstream>>,
    generation: CancellationToken,
    shared: Arc<Shared>,
) {
    let io = TokioIo::new(Counted {
        inner: stream,
        shared: shared.clone(),
    });
    let pooled: Arc<tokio::sync::Mutex<Option<SendRequest<Incoming>>>> = Arc::default();
    let tunnels = generation.clone();
    let service = service_fn(move |req: Request<Incoming>| {
        let (upstream, shared, pooled, generation) = (
            upstream.clone(),
            shared.clone(),
            pooled.clone(),
            tunnels.clone(),
        );
        async move {
            let response = match upstream {
                None => plain(StatusCode::BAD_GATEWAY, "the relay has no upstream"),
                Some(up) if req.method() == Method::CONNECT => {
                    tunnel(req, &up, &shared, generation).await
                }
                Some(up) => forward(req, &up, &shared, &pooled).await,
            };
            Ok::<_, Infallible>(response)
        }
    });
    let conn = http1::Builder::new()
        .serve_connection(io, service)
        .with_upgrades();
    // NB: ending the generation drops the connection (and with it the pooled upstream
    // connection): a rotation must not leave bytes flowing through the old IP.
    tokio::select! {
        result = conn => {
            if let Err(err) = result {
                debug!(error = %err, "browser connection ended with an error");
            }
        }
        () = generation.cancelled() => {}
    }
}

/// The title of the relay's own error pages, so a page reader can tell them from a mall's.
pub const ERROR_TITLE: &str = "lps relay:";

fn plain(status: StatusCode, text: &str) -> Response<Body> {
    let text = text
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    let html = format!(
        "<!DOCTYPE html><html><head><title>{ERROR_TITLE} {text}</title></head><body>{text}</body></html>"
    );
    let mut response = Response::new(Body::from(html));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    response
}

/// Forwards an absolute-form request over this browser connection's upstream connection.
async fn forward(
    mut req: Request<Incoming>,
    upstream: &Upstream,
    shared: &Shared,
    pooled: &tokio::sync::Mutex<Option<SendRequest<Incoming>>>,
) -> Response<Body> {
    let Some(authority) = req.uri().authority().map(ToString::to_string) else {
        return plain(StatusCode::BAD_REQUEST, "not a proxy request");
    };
    let headers = req.headers_mut();
    headers.remove(header::PROXY_AUTHORIZATION);
    headers.remove("proxy-connection");
    if let Some(auth) = &upstream.auth {
        headers.insert(header::PROXY_AUTHORIZATION, auth.clone());
    }
    let mut slot = pooled.lock().await;
    // One retry: a kept-alive upstream connection the gateway closed in the meantime hands
    // the request back unsent.
    for _ in 0..2 {
        let mut sender = match slot.take() {
            Some(sender) if !sender.is_closed() => sender,
            _ => match open_upstream(upstream).await {
                Ok(sender) => sender,
                Err(err) => {
                    shared.upstream_error();
                    debug!(error = %err, upstream = ?upstream, "gateway unreachable");
                    return plain(StatusCode::BAD_GATEWAY, "the proxy gateway is unreachable");
                }
            },
        };
        if sender.ready().await.is_err() {
            continue;
        }
        match sender.try_send_request(req).await {
            Ok(response) => {
                if response.status() == StatusCode::PROXY_AUTHENTICATION_REQUIRED {
                    shared.upstream_error();
                }
                *slot = Some(sender);
                if let Some(error) = proxy_status_error(response.headers()) {
                    let status = response.status();
                    shared.refused(
                        &authority,
                        Refusal {
                            status: status.as_u16(),
                            detail: error.clone(),
                        },
                    );
                    return plain(
                        StatusCode::BAD_GATEWAY,
                        &format!("the proxy gateway refused {authority}: {error}"),
                    );
                }
                return response.map(Body::new);
            }
            Err(mut err) => match err.take_message() {
                Some(unsent) => req = unsent,
                None => {
                    shared.upstream_error();
                    debug!(error = %err.into_error(), "forwarding failed");
                    return plain(StatusCode::BAD_GATEWAY, "the proxy gateway failed");
                }
            },
        }
    }
    shared.upstream_error();
    plain(StatusCode::BAD_GATEWAY, "the proxy gateway keeps closing")
}

async fn open_upstream(upstream: &Upstream) -> io::Result<SendRequest<Incoming>> {
    let stream = upstream.connect().await?;
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(io::Error::other)?;
    tokio::spawn(
        async move {
            let _ = conn.await;
        }
        .in_current_span(),
    );
    Ok(sender)
}

/// A `CONNECT` tunnel: CONNECT through the gateway (with credentials), then splice.
async fn tunnel(
    req: Request<Incoming>,
    upstream: &Upstream,
    shared: &Arc<Shared>,
    generation: CancellationToken,
) -> Response<Body> {
    let Some(target) = req.uri().authority().map(ToString::to_string) else {
        return plain(StatusCode::BAD_REQUEST, "CONNECT needs host:port");
    };
    let (mut gateway, leftover) = match open_tunnel(upstream, &target).await {
        Ok(opened) => opened,
        Err(TunnelError::Refused(status, reason)) => {
            // NB: only the gateway refusing *us* (407) is a gateway failure. A refused
            // target is that host's problem: Chromium's own background calls to hosts the
            // gateway does not serve must not make a healthy page look like a failed proxy.
            // It is remembered, so a job whose mall is the refused host can say so.
            if status == StatusCode::PROXY_AUTHENTICATION_REQUIRED {
                shared.upstream_error();
            } else {
                shared.refused(
                    &target,
                    Refusal {
                        status: status.as_u16(),
                        detail: reason,
                    },
                );
            }
            let mut response = plain(StatusCode::BAD_GATEWAY, "the proxy gateway refused");
            *response.status_mut() = status;
            return response;
        }
        Err(TunnelError::Io(err)) => {
            shared.upstream_error();
            debug!(error = %err, "tunnel through the gateway failed");
            return plain(StatusCode::BAD_GATEWAY, "the proxy gateway is unreachable");
        }
    };
    tokio::spawn(
        async move {
            let upgraded = match hyper::upgrade::on(req).await {
                Ok(upgraded) => upgraded,
                Err(err) => {
                    debug!(error = %err, "browser did not take the tunnel");
                    return;
                }
            };
            let mut browser = TokioIo::new(upgraded);
            let splice = async {
                if !leftover.is_empty() {
                    browser.write_all(&leftover).await?;
                }
                tokio::io::copy_bidirectional(&mut browser, &mut gateway).await
            };
            tokio::select! {
                _ = splice => {}
                () = generation.cancelled() => {}
            }
        }
        .in_current_span(),
    );
    Response::new(Body::empty())
}

enum TunnelError {
    /// The gateway's status and what it said (its `Proxy-Status` error, else its reason
    /// phrase).
    Refused(StatusCode, String),
    Io(io::Error),
}

impl From<io::Error> for TunnelError {
    fn from(err: io::Error) -> Self {
        Self::Io(err)
    }
}

async fn open_tunnel(
    upstream: &Upstream,
    target: &str,
) -> Result<(TcpStream, Vec<u8>), TunnelError> {
    let mut stream = upstream.connect().await?;
    let mut head = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n").into_bytes();
    if let Some(auth) = &upstream.auth {
        head.extend_from_slice(b"Proxy-Authorization: ");
        head.extend_from_slice(auth.as_bytes());
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(b"\r\n");
    stream.write_all(&head).await?;
    let mut buf = Vec::with_capacity(1024);
    let end = loop {
        let mut chunk = [0u8; 1024];
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "gateway closed").into());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos + 4;
        }
        if buf.len() > MAX_CONNECT_HEAD {
            return Err(io::Error::other("CONNECT answer head too long").into());
        }
    };
    let head = String::from_utf8_lossy(&buf[..end]);
    let mut lines = head.lines();
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse::<u16>().ok())
        .and_then(|code| StatusCode::from_u16(code).ok())
        .unwrap_or(StatusCode::BAD_GATEWAY);
    if !status.is_success() {
        let mut headers = hyper::HeaderMap::new();
        for line in lines {
            if let Some((name, value)) = line.split_once(':')
                && name.trim().eq_ignore_ascii_case("proxy-status")
                && let Ok(value) = HeaderValue::from_str(value.trim())
            {
                headers.insert("proxy-status", value);
            }
        }
        let reason = proxy_status_error(&headers).unwrap_or_else(|| {
            status_line
                .splitn(3, ' ')
                .nth(2)
                .unwrap_or_default()
                .chars()
                .take(120)
                .collect()
        });
        return Err(TunnelError::Refused(status, reason));
    }
    Ok((stream, buf.split_off(end)))
}

/// The browser side of a connection, counting bytes both ways.
struct Counted {
    inner: TcpStream,
    shared: Arc<Shared>,
}

impl AsyncRead for Counted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        let read = buf.filled().len().saturating_sub(before);
        self.shared
            .counters
            .from_browser
            .fetch_add(read as u64, Ordering::Relaxed);
        polled
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = &polled {
            self.shared
                .counters
                .to_browser
                .fetch_add(*n as u64, Ordering::Relaxed);
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_never_show() {
        let up = Upstream::new("gw.example", 8001, "user", "s3cr3t");
        let shown = format!("{up:?}");
        assert!(
            !shown.contains("s3cr3t") && !shown.contains("user:"),
            "{shown}"
        );
        assert!(up.auth.as_ref().is_some_and(HeaderValue::is_sensitive));
        assert!(Upstream::new("gw", 1, "", "").auth.is_none());
    }

    /// A CONNECT through the gateway, answered with its status line.
    async fn connect_through(relay: &Relay, target: &str) -> String {
        let mut stream = TcpStream::connect(relay.addr()).await.unwrap();
        let head = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n");
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut answer = vec![0u8; 256];
        let n = stream.read(&mut answer).await.unwrap();
        String::from_utf8_lossy(&answer[..n])
            .lines()
            .next()
            .unwrap_or_default()
            .to_owned()
    }

    #[tokio::test]
    async fn a_refused_target_is_not_a_gateway_failure_but_refused_credentials_are() {
        use lps_test_kit::gateway::{Gateway, GatewayConfig};
        let gateway = Gateway::start(GatewayConfig::new(1).with_credentials("u", "right"))
            .await
            .unwrap();
        let port = gateway.ports()[0].addr.port();
        let relay = Relay::start().await.unwrap();
        // Chromium's background calls go to hosts the gateway does not serve.
        relay.point_to(Some(Upstream::new("127.0.0.1", port, "u", "right")));
        let status = connect_through(&relay, "accounts.google.com:443").await;
        assert!(status.contains(" 403"), "{status}");
        assert_eq!(relay.counters().upstream_errors, 0);
        // ...and remembered as the gateway's refusal of that host, in its words.
        let refusal = relay.refusal("Accounts.Google.com").unwrap();
        assert_eq!(refusal.status, 403);
        assert!(
            refusal.detail.starts_with("destination_ip_prohibited"),
            "{refusal}"
        );
        // A forwarded request the gateway refuses itself comes back as the relay's own
        // error page, never as a 403 page a reader could take for the mall's block.
        let mut stream = TcpStream::connect(relay.addr()).await.unwrap();
        stream
            .write_all(
                b"GET http://shop.invalid:8080/s?q=1 HTTP/1.1\r\nHost: shop.invalid:8080\r\n\r\n",
            )
            .await
            .unwrap();
        let mut answer = vec![0u8; 1024];
        let n = stream.read(&mut answer).await.unwrap();
        let answer = String::from_utf8_lossy(&answer[..n]);
        assert!(answer.starts_with("HTTP/1.1 502"), "{answer}");
        assert!(
            answer.contains(ERROR_TITLE) && answer.contains("shop.invalid"),
            "{answer}"
        );
        assert_eq!(relay.refusal("shop.invalid").map(|r| r.status), Some(403));
        assert_eq!(relay.counters().upstream_errors, 0);
        relay.forget_refusal("shop.invalid");
        assert!(relay.refusal("shop.invalid").is_none());
        // The gateway refusing the relay itself is.
        relay.point_to(Some(Upstream::new("127.0.0.1", port, "u", "wrong")));
        let status = connect_through(&relay, "127.0.0.1:9").await;
        assert!(status.contains(" 407"), "{status}");
        assert_eq!(relay.counters().upstream_errors, 1);
        relay.stop().await;
        gateway.shutdown().await;
    }

    #[tokio::test]
    async fn without_upstream_everything_is_refused() {
        let relay = Relay::start().await.unwrap();
        let mut stream = TcpStream::connect(relay.addr()).await.unwrap();
        stream
            .write_all(b"GET http://127.0.0.1:9/x HTTP/1.1\r\nHost: 127.0.0.1:9\r\n\r\n")
            .await
            .unwrap();
        let mut answer = vec![0u8; 64];
        let n = stream.read(&mut answer).await.unwrap();
        assert!(answer[..n].starts_with(b"HTTP/1.1 502"), "{answer:?}");
        let counters = relay.counters();
        assert!(counters.from_browser > 0 && counters.to_browser > 0);
        relay.stop().await;
    }
}
