//! One gateway port's HTTP forward proxy: the client connection, authentication, the
//! target check, forwarding of absolute-form requests and CONNECT tunnels.
//!
//! Order of checks per request: credentials (407) → proxy form (400) → allow-list (403) →
//! upstream connect (502). Forwarded requests get origin-form URIs, lose hop-by-hop and
//! proxy headers, and carry [`EXIT_IP_HEADER`] = the port's label (any client-sent value is
//! replaced). Client keep-alive is hyper's; each forwarded request uses a fresh upstream
//! connection (loopback, so cheap, and no upstream state leaks between requests).
//!
//! Cancellation: connection tasks stop on `graceful` (in-flight requests finish), tunnels
//! end on `graceful`, and everything is dropped on `abort`.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;

use axum::body::Body;
use base64::Engine as _;
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use crate::EXIT_IP_HEADER;
use crate::gateway::counting::CountingStream;
use crate::gateway::stats::PortCounters;
use crate::gateway::target::{AllowList, Target, split_host_port};

/// Realm sent in `Proxy-Authenticate`.
pub const PROXY_REALM: &str = "lps-gateway";

/// Headers never passed on (RFC 9110 §7.6.1 plus the proxy ones).
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "proxy-connection",
    "keep-alive",
    "proxy-authorization",
    "proxy-authenticate",
    "te",
    "trailer",
    "upgrade",
];

/// What every port of one gateway shares.
#[derive(Debug)]
pub(crate) struct Policy {
    /// `user:pass` expected in `Proxy-Authorization: Basic`, or `None` for no auth.
    pub(crate) credentials: Option<String>,
    pub(crate) allowed: AllowList,
}

impl Policy {
    fn authorized(&self, headers: &HeaderMap) -> bool {
        let Some(expected) = &self.credentials else {
            return true;
        };
        headers
            .get(header::PROXY_AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("basic"))
            .and_then(|(_, encoded)| {
                base64::engine::general_purpose::STANDARD
                    .decode(encoded.trim())
                    .ok()
            })
            .is_some_and(|decoded| decoded == expected.as_bytes())
    }
}

/// One port: its label, counters, and the gateway's shared policy and task control.
#[derive(Debug)]
pub(crate) struct PortCtx {
    pub(crate) label: String,
    pub(crate) counters: Arc<PortCounters>,
    pub(crate) policy: Arc<Policy>,
    pub(crate) tasks: TaskTracker,
    pub(crate) graceful: CancellationToken,
    pub(crate) abort: CancellationToken,
}

impl PortCtx {
    /// Spawns a tracked task that is dropped when the gateway aborts.
    fn spawn(&self, fut: impl Future<Output = ()> + Send + 'static) {
        let abort = self.abort.clone();
        let span = tracing::debug_span!("gateway.task", gateway.port = %self.label);
        self.tasks.spawn(
            async move {
                tokio::select! {
                    () = abort.cancelled() => {}
                    () = fut => {}
                }
            }
            .instrument(span),
        );
    }
}

/// Serves one accepted client connection until it closes or the gateway stops.
pub(crate) fn spawn_connection(ctx: &Arc<PortCtx>, stream: TcpStream) {
    PortCounters::bump(&ctx.counters.connections);
    let io = TokioIo::new(CountingStream::new(stream, Arc::clone(&ctx.counters)));
    let service_ctx = Arc::clone(ctx);
    let service = service_fn(move |req| {
        let ctx = Arc::clone(&service_ctx);
        async move { Ok::<_, Infallible>(handle(req, ctx).await) }
    });
    let graceful = ctx.graceful.clone();
    ctx.spawn(async move {
        let conn = http1::Builder::new()
            .serve_connection(io, service)
            .with_upgrades();
        let mut conn = std::pin::pin!(conn);
        let result = tokio::select! {
            r = conn.as_mut() => r,
            () = graceful.cancelled() => {
                conn.as_mut().graceful_shutdown();
                conn.await
            }
        };
        if let Err(error) = result {
            tracing::debug!(%error, "client connection ended with an error");
        }
    });
}

async fn handle(req: Request<Incoming>, ctx: Arc<PortCtx>) -> Response<Body> {
    PortCounters::bump(&ctx.counters.requests);
    if !ctx.policy.authorized(req.headers()) {
        PortCounters::bump(&ctx.counters.auth_failures);
        return proxy_auth_required();
    }
    let Some(target) = target_of(&req) else {
        PortCounters::bump(&ctx.counters.bad_requests);
        return text(
            StatusCode::BAD_REQUEST,
            "lps-gateway: not a proxy request\n",
        );
    };
    let Some(addr) = ctx.policy.allowed.resolve(&target) else {
        PortCounters::bump(&ctx.counters.refused);
        tracing::debug!(gateway.port = %ctx.label, %target, "target refused");
        // NB: the refusal says it is the gateway's own (RFC 9209 Proxy-Status), as real
        // gateways' error headers do, so a client can tell it from the target's 403.
        let mut response = text(StatusCode::FORBIDDEN, "lps-gateway: target not allowed\n");
        response.headers_mut().insert(
            "proxy-status",
            HeaderValue::from_static(
                "lps-gateway; error=destination_ip_prohibited; details=\"target not allowed\"",
            ),
        );
        return response;
    };
    let upstream = match TcpStream::connect(addr).await {
        Ok(stream) => stream,
        Err(error) => {
            tracing::info!(gateway.port = %ctx.label, %target, %error, "upstream connect failed");
            return bad_gateway(&ctx);
        }
    };
    if req.method() == Method::CONNECT {
        tunnel(req, upstream, &ctx)
    } else {
        forward(req, upstream, &ctx).await
    }
}

/// The target of a proxy request: authority-form for CONNECT, absolute-form otherwise.
fn target_of(req: &Request<Incoming>) -> Option<Target> {
    let uri = req.uri();
    if req.method() == Method::CONNECT {
        return split_host_port(uri.authority()?.as_str());
    }
    let default_port = match uri.scheme_str()? {
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    let host = uri.host()?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    Some(Target {
        host: host.to_ascii_lowercase(),
        port: uri.port_u16().unwrap_or(default_port),
    })
}

fn tunnel(req: Request<Incoming>, mut upstream: TcpStream, ctx: &PortCtx) -> Response<Body> {
    PortCounters::bump(&ctx.counters.tunnels);
    let graceful = ctx.graceful.clone();
    ctx.spawn(async move {
        let upgraded = match hyper::upgrade::on(req).await {
            Ok(upgraded) => upgraded,
            Err(error) => {
                tracing::debug!(%error, "connect upgrade failed");
                return;
            }
        };
        let mut client = TokioIo::new(upgraded);
        tokio::select! {
            () = graceful.cancelled() => {}
            r = tokio::io::copy_bidirectional(&mut client, &mut upstream) => {
                if let Err(error) = r {
                    tracing::debug!(%error, "tunnel ended with an error");
                }
            }
        }
    });
    Response::new(Body::empty())
}

async fn forward(mut req: Request<Incoming>, upstream: TcpStream, ctx: &PortCtx) -> Response<Body> {
    let (mut sender, conn) =
        match hyper::client::conn::http1::handshake(TokioIo::new(upstream)).await {
            Ok(pair) => pair,
            Err(error) => {
                tracing::info!(%error, "upstream handshake failed");
                return bad_gateway(ctx);
            }
        };
    ctx.spawn(async move {
        if let Err(error) = conn.await {
            tracing::debug!(%error, "upstream connection ended with an error");
        }
    });
    if prepare_upstream_request(&mut req, &ctx.label).is_err() {
        PortCounters::bump(&ctx.counters.bad_requests);
        return text(StatusCode::BAD_REQUEST, "lps-gateway: bad request target\n");
    }
    match sender.send_request(req).await {
        Ok(mut response) => {
            PortCounters::bump(&ctx.counters.forwarded);
            strip_hop_by_hop(response.headers_mut());
            response.map(Body::new)
        }
        Err(error) => {
            tracing::info!(%error, "upstream request failed");
            bad_gateway(ctx)
        }
    }
}

/// Marker: the request target cannot be turned into origin-form.
#[derive(Debug)]
struct BadTarget;

/// Rewrites an absolute-form proxy request into what the origin server expects.
fn prepare_upstream_request(req: &mut Request<Incoming>, label: &str) -> Result<(), BadTarget> {
    let authority = req.uri().authority().cloned().ok_or(BadTarget)?;
    let path = req
        .uri()
        .path_and_query()
        .map_or("/", |pq| pq.as_str())
        .to_owned();
    *req.uri_mut() = path.parse::<Uri>().map_err(|_| BadTarget)?;
    let headers = req.headers_mut();
    strip_hop_by_hop(headers);
    if !headers.contains_key(header::HOST) {
        let host = HeaderValue::from_str(authority.as_str()).map_err(|_| BadTarget)?;
        headers.insert(header::HOST, host);
    }
    let exit = HeaderValue::from_str(label).map_err(|_| BadTarget)?;
    headers.insert(HeaderName::from_static(EXIT_IP_HEADER), exit);
    Ok(())
}

/// Removes hop-by-hop headers, including those named in `Connection`.
fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in HOP_BY_HOP {
        headers.remove(name);
    }
}

fn text(status: StatusCode, body: &'static str) -> Response<Body> {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

fn proxy_auth_required() -> Response<Body> {
    let mut response = text(
        StatusCode::PROXY_AUTHENTICATION_REQUIRED,
        "lps-gateway: proxy authentication required\n",
    );
    response.headers_mut().insert(
        header::PROXY_AUTHENTICATE,
        HeaderValue::from_static("Basic realm=\"lps-gateway\""),
    );
    response
}

fn bad_gateway(ctx: &PortCtx) -> Response<Body> {
    PortCounters::bump(&ctx.counters.upstream_errors);
    text(
        StatusCode::BAD_GATEWAY,
        "lps-gateway: upstream unavailable\n",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(credentials: Option<&str>) -> Policy {
        Policy {
            credentials: credentials.map(str::to_owned),
            allowed: AllowList::parse::<&str>(&[]).expect("empty list"),
        }
    }

    fn basic(user_pass: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        let encoded = base64::engine::general_purpose::STANDARD.encode(user_pass);
        headers.insert(
            header::PROXY_AUTHORIZATION,
            HeaderValue::from_str(&format!("Basic {encoded}")).expect("header"),
        );
        headers
    }

    #[test]
    fn basic_auth_is_checked() {
        let p = policy(Some("lps:secret"));
        assert!(p.authorized(&basic("lps:secret")));
        assert!(!p.authorized(&basic("lps:wrong")));
        assert!(!p.authorized(&HeaderMap::new()));
        assert!(policy(None).authorized(&HeaderMap::new()));
    }

    #[test]
    fn strips_connection_named_headers() {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONNECTION, HeaderValue::from_static("x-foo, close"));
        headers.insert("x-foo", HeaderValue::from_static("1"));
        headers.insert("proxy-connection", HeaderValue::from_static("keep-alive"));
        headers.insert("x-keep", HeaderValue::from_static("1"));
        strip_hop_by_hop(&mut headers);
        assert!(headers.get("x-foo").is_none());
        assert!(headers.get("proxy-connection").is_none());
        assert!(headers.get(header::CONNECTION).is_none());
        assert!(headers.get("x-keep").is_some());
    }
}
