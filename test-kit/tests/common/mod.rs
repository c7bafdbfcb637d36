//! Test helpers: a small HTTP/1.1 client over hyper (origin-form to a mall, absolute-form
//! or CONNECT to a gateway port) and raw-socket helpers.
// NB: each test binary uses a different subset of these helpers.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::Duration;

use axum::body::Body;
use base64::Engine as _;
use bytes::Bytes;
use hyper::client::conn::http1::SendRequest;
use hyper::header::{HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Upper bound for any single exchange in tests.
pub const IO_TIMEOUT: Duration = Duration::from_secs(20);

/// A received response.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Reply {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// One keep-alive client connection.
pub struct HttpConn {
    sender: SendRequest<Body>,
}

impl HttpConn {
    pub async fn open(addr: SocketAddr) -> HttpConn {
        let stream = TcpStream::connect(addr).await.expect("connect");
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .expect("handshake");
        tokio::spawn(async move {
            let _ = conn.await;
        });
        HttpConn { sender }
    }

    /// Sends a request with `target` written as-is on the request line.
    pub async fn send(&mut self, method: Method, target: &str, headers: &[(&str, &str)]) -> Reply {
        self.request(method, target, headers, Vec::new()).await
    }

    /// Like [`HttpConn::send`], with a body.
    pub async fn request(
        &mut self,
        method: Method,
        target: &str,
        headers: &[(&str, &str)],
        body: Vec<u8>,
    ) -> Reply {
        let mut req = Request::builder()
            .method(method)
            .uri(target)
            .body(Body::from(body))
            .expect("request");
        let map = req.headers_mut();
        for (name, value) in headers {
            map.append(
                HeaderName::from_bytes(name.as_bytes()).expect("header name"),
                HeaderValue::from_str(value).expect("header value"),
            );
        }
        if !map.contains_key(hyper::header::HOST) {
            let host = host_of(target);
            map.insert(
                hyper::header::HOST,
                HeaderValue::from_str(&host).expect("host"),
            );
        }
        let exchange = async {
            self.sender.ready().await.expect("connection ready");
            let response = self.sender.send_request(req).await.expect("response");
            let (parts, body) = response.into_parts();
            let body = axum::body::to_bytes(Body::new(body), usize::MAX)
                .await
                .expect("body");
            Reply {
                status: parts.status,
                headers: parts.headers,
                body,
            }
        };
        tokio::time::timeout(IO_TIMEOUT, exchange)
            .await
            .expect("exchange timed out")
    }

    pub async fn get(&mut self, target: &str, headers: &[(&str, &str)]) -> Reply {
        self.send(Method::GET, target, headers).await
    }
}

fn host_of(target: &str) -> String {
    target
        .strip_prefix("http://")
        .and_then(|rest| rest.split('/').next())
        .unwrap_or("localhost")
        .to_owned()
}

/// One request on a fresh connection.
pub async fn get(addr: SocketAddr, target: &str, headers: &[(&str, &str)]) -> Reply {
    HttpConn::open(addr).await.get(target, headers).await
}

/// One POST (empty body) on a fresh connection.
pub async fn post(addr: SocketAddr, target: &str) -> Reply {
    HttpConn::open(addr)
        .await
        .send(Method::POST, target, &[])
        .await
}

/// `Basic base64(user:pass)`.
pub fn basic(user: &str, pass: &str) -> String {
    let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"));
    format!("Basic {encoded}")
}

/// Percent-encodes a query value.
pub fn enc(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Writes `head` on a fresh connection and reads the response head (up to `\r\n\r\n`).
pub async fn raw_head(addr: SocketAddr, head: &str) -> (TcpStream, String) {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.write_all(head.as_bytes()).await.expect("write");
    let head = read_head(&mut stream).await;
    (stream, head)
}

/// Reads byte by byte until the end of a response head.
pub async fn read_head(stream: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let read = async {
        while !head.ends_with(b"\r\n\r\n") {
            let byte = stream.read_u8().await.expect("read head");
            head.push(byte);
        }
    };
    tokio::time::timeout(IO_TIMEOUT, read)
        .await
        .expect("head timed out");
    String::from_utf8_lossy(&head).into_owned()
}

/// Reads until the peer closes.
pub async fn read_to_close(stream: &mut TcpStream) -> String {
    let mut body = Vec::new();
    tokio::time::timeout(IO_TIMEOUT, stream.read_to_end(&mut body))
        .await
        .expect("read timed out")
        .expect("read");
    String::from_utf8_lossy(&body).into_owned()
}
