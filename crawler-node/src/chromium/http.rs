//! The HTTP client the node speaks WebDriver with: one small HTTP/1.1 request per call over
//! a fresh loopback TCP connection, built on hyper.
//!
//! Why not thirtyfour's default (reqwest): the WebDriver server is always the node's own
//! chromedriver (or a sidecar), so pooling and TLS buy nothing, and a general-purpose client
//! would also honour `HTTP_PROXY`, sending WebDriver traffic to a proxy meant for the mall.
//! This client never uses a proxy and bounds every request by its own timeout.
//!
//! Stateless: a call owns its connection, and dropping the call future closes it
//! (cancel-safe; the WebDriver server may still finish the command).
//!
//! Each command thirtyfour sends is a `webdriver.<command>` client span (`navigate`,
//! `execute`, `find_element`, `get_element_text`, … from the method and path, see
//! [`command_name`]); thirtyfour's own `run_webdriver_cmd` span names no command and is
//! not exported (`lps_telemetry`).

use std::{sync::Arc, time::Duration};

use bytes::Bytes;
use hyper::{Method, Request, Response, Uri, header};
use hyper_util::rt::TokioIo;
use thirtyfour::{
    error::{WebDriverError, WebDriverResult},
    session::http::{Body, HttpClient},
};
use tokio::net::TcpStream;
use tracing::{Instrument as _, info_span};

/// Largest WebDriver answer read (a page source can be large).
const MAX_BODY: usize = 64 * 1024 * 1024;

/// The WebDriver HTTP client (see the module docs). Cheap to clone.
#[derive(Debug, Clone)]
pub struct WebDriverHttp {
    timeout: Duration,
}

impl WebDriverHttp {
    /// A client whose requests each end within `timeout`.
    pub fn new(timeout: Duration) -> Self {
        Self { timeout }
    }

    /// One request: `body` is sent as JSON when present.
    pub async fn call(
        &self,
        method: Method,
        uri: &Uri,
        body: Option<Vec<u8>>,
    ) -> Result<Response<Bytes>, String> {
        match tokio::time::timeout(self.timeout, self.call_inner(method, uri, body)).await {
            Ok(result) => result,
            Err(_) => Err(format!(
                "no answer from the WebDriver server within {:?}",
                self.timeout
            )),
        }
    }

    async fn call_inner(
        &self,
        method: Method,
        uri: &Uri,
        body: Option<Vec<u8>>,
    ) -> Result<Response<Bytes>, String> {
        let authority = uri
            .authority()
            .ok_or_else(|| format!("{uri}: no host in the WebDriver URL"))?;
        let port = authority.port_u16().unwrap_or(80);
        let stream = TcpStream::connect((authority.host(), port))
            .await
            .map_err(|e| format!("cannot connect to the WebDriver server {authority}: {e}"))?;
        let _ = stream.set_nodelay(true);
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| format!("WebDriver handshake: {e}"))?;
        // NB: the connection task ends when the request is done and `sender` is dropped.
        tokio::spawn(
            async move {
                let _ = conn.await;
            }
            .in_current_span(),
        );
        let path = uri.path_and_query().map_or("/", |p| p.as_str());
        let mut request = Request::builder()
            .method(method)
            .uri(path)
            .header(header::HOST, authority.as_str())
            .header(header::ACCEPT, "application/json");
        let body = match body {
            Some(bytes) => {
                request = request.header(header::CONTENT_TYPE, "application/json; charset=utf-8");
                axum::body::Body::from(bytes)
            }
            None => axum::body::Body::empty(),
        };
        let request = request
            .body(body)
            .map_err(|e| format!("bad WebDriver request: {e}"))?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| format!("WebDriver request failed: {e}"))?;
        let (parts, incoming) = response.into_parts();
        let bytes = axum::body::to_bytes(axum::body::Body::new(incoming), MAX_BODY)
            .await
            .map_err(|e| format!("reading the WebDriver answer: {e}"))?;
        Ok(Response::from_parts(parts, bytes))
    }
}

/// The WebDriver command of a request, for span names: a few well-known ones by their
/// W3C name (`new_session`, `navigate`, `execute`, `find_element`, `page_source`, …),
/// the rest as the method and the path after the WebDriver session id, with ids and names left out
/// (`get_element_text`, `post_element_click`, `get_cookie`).
pub fn command_name(method: &Method, path: &str) -> String {
    /// Path segments followed by an id or a name, which is left out.
    const BEFORE_PARAMETER: [&str; 7] = [
        "element",
        "shadow",
        "attribute",
        "property",
        "css",
        "cookie",
        "frame",
    ];
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let rest: &[&str] = match segments.as_slice() {
        ["session"] if method == Method::POST => return "new_session".into(),
        ["session", _] if method == Method::DELETE => return "delete_session".into(),
        ["session", _, rest @ ..] => rest,
        other => other,
    };
    let mut kept: Vec<&str> = Vec::new();
    let mut skip_next = false;
    for segment in rest {
        if skip_next {
            skip_next = false;
            continue;
        }
        kept.push(segment);
        skip_next = BEFORE_PARAMETER.contains(segment);
    }
    // NB: `element/{id}` is an id, but a trailing `element`/`elements` is a search.
    let name = kept.join("_");
    match (method.as_str(), name.as_str()) {
        ("POST", "url") => "navigate".into(),
        ("GET", "url") => "current_url".into(),
        ("POST", "execute_sync") => "execute".into(),
        ("POST", "execute_async") => "execute_async".into(),
        ("GET", "source") => "page_source".into(),
        ("POST", "element") => "find_element".into(),
        ("POST", "elements") => "find_elements".into(),
        (m, "") => m.to_ascii_lowercase(),
        (m, n) => format!("{}_{n}", m.to_ascii_lowercase()),
    }
}

#[async_trait::async_trait]
impl HttpClient for WebDriverHttp {
    async fn send(&self, request: Request<Body<'_>>) -> WebDriverResult<Response<Bytes>> {
        let (parts, body) = request.into_parts();
        let body = match body {
            Body::Empty => None,
            Body::Json(json) => {
                Some(serde_json::to_vec(json).map_err(|e| WebDriverError::Json(e.to_string()))?)
            }
        };
        let command = command_name(&parts.method, parts.uri.path());
        let span = info_span!(
            "webdriver.command",
            otel.name = format!("webdriver.{command}"),
            otel.kind = "client",
            webdriver.command = command.as_str(),
            http.request.method = parts.method.as_str(),
            http.response.status_code = tracing::field::Empty,
        );
        let answer = self
            .call(parts.method, &parts.uri, body)
            .instrument(span.clone())
            .await;
        match &answer {
            Ok(response) => {
                span.record(
                    "http.response.status_code",
                    i64::from(response.status().as_u16()),
                );
            }
            Err(message) => lps_telemetry::fail(&span, message.as_str()),
        }
        answer.map_err(WebDriverError::RequestFailed)
    }

    async fn new(&self) -> Arc<dyn HttpClient> {
        Arc::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_named_from_method_and_path() {
        let name = |m: Method, p: &str| command_name(&m, p);
        assert_eq!(name(Method::POST, "/session"), "new_session");
        assert_eq!(name(Method::DELETE, "/session/abc"), "delete_session");
        assert_eq!(name(Method::POST, "/session/abc/url"), "navigate");
        assert_eq!(name(Method::POST, "/session/abc/execute/sync"), "execute");
        assert_eq!(name(Method::POST, "/session/abc/elements"), "find_elements");
        assert_eq!(
            name(Method::GET, "/session/abc/element/e-1/text"),
            "get_element_text"
        );
        assert_eq!(
            name(Method::GET, "/session/abc/element/e-1/attribute/href"),
            "get_element_attribute"
        );
        assert_eq!(
            name(Method::POST, "/session/abc/element/e-1/element"),
            "post_element_element"
        );
        assert_eq!(
            name(Method::POST, "/session/abc/goog/cdp/execute"),
            "post_goog_cdp_execute"
        );
        assert_eq!(name(Method::GET, "/status"), "get_status");
    }
}
