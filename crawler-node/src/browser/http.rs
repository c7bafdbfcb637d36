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

use std::{sync::Arc, time::Duration};

use bytes::Bytes;
use hyper::{Method, Request, Response, Uri, header};
use hyper_util::rt::TokioIo;
use thirtyfour::{
    error::{WebDriverError, WebDriverResult},
    session::http::{Body, HttpClient},
};
use tokio::net::TcpStream;
use tracing::Instrument as _;

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
        self.call(parts.method, &parts.uri, body)
            .await
            .map_err(WebDriverError::RequestFailed)
    }

    async fn new(&self) -> Arc<dyn HttpClient> {
        Arc::new(self.clone())
    }
}
