//! The fake proxy gateway over real loopback sockets: authentication, the allow-list,
//! forwarding with the exit-IP header, CONNECT tunnels, keep-alive, per-port stats and
//! per-exit-IP blocking at the mall.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{HttpConn, basic, enc, raw_head, read_to_close};
use lps_test_kit::catalog::MallStyle;
use lps_test_kit::gateway::{Gateway, GatewayConfig, GatewayError, GatewayHandle};
use lps_test_kit::mall::{MallConfig, MallHandle, MallServer, markup};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const USER: &str = "lps";
const PASS: &str = "s3cret-pass";

async fn mall(style: MallStyle, block_after: Option<u32>) -> MallHandle {
    MallServer::start(MallConfig::new(style).with_block_after(block_after))
        .await
        .expect("mall")
}

async fn gateway(ports: usize, allow: &[SocketAddr]) -> GatewayHandle {
    let mut config = GatewayConfig::new(ports).with_credentials(USER, PASS);
    for addr in allow {
        config = config.allow(addr);
    }
    Gateway::start(config).await.expect("gateway")
}

fn port(gw: &GatewayHandle, label: &str) -> SocketAddr {
    gw.port(label).expect("port").addr
}

fn auth() -> (&'static str, String) {
    ("proxy-authorization", basic(USER, PASS))
}

/// A one-shot origin server that answers with the request head it received.
async fn echo_server() -> (SocketAddr, tokio::task::JoinHandle<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let task = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.expect("accept");
        let mut head = Vec::new();
        while !head.ends_with(b"\r\n\r\n") {
            head.push(stream.read_u8().await.expect("read"));
        }
        let head = String::from_utf8_lossy(&head).into_owned();
        let response = format!(
            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{head}",
            head.len()
        );
        stream.write_all(response.as_bytes()).await.expect("write");
        head
    });
    (addr, task)
}

#[tokio::test]
async fn requires_credentials_with_407() {
    let mall = mall(MallStyle::Alpha, None).await;
    let gw = gateway(2, &[mall.addr()]).await;
    let url = format!("{}/api/search?q=x", mall.base_url());
    let mut conn = HttpConn::open(port(&gw, "exit-01")).await;

    let missing = conn.get(&url, &[]).await;
    assert_eq!(missing.status, 407);
    assert_eq!(
        missing.header("proxy-authenticate"),
        Some("Basic realm=\"lps-gateway\"")
    );
    let wrong = basic(USER, "wrong");
    let wrong = conn.get(&url, &[("proxy-authorization", &wrong)]).await;
    assert_eq!(wrong.status, 407);
    let (name, value) = auth();
    assert_eq!(
        conn.get(&url, &[(name, &value)]).await.status,
        200,
        "same connection"
    );

    let stats = gw.port_stats("exit-01").expect("stats");
    assert_eq!(stats.auth_failures, 2);
    assert_eq!(stats.forwarded, 1);
    assert_eq!(
        mall.stats().api_requests,
        1,
        "rejected requests never reach the mall"
    );
    gw.shutdown().await;
    mall.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn refuses_disallowed_targets_with_403_without_connecting() {
    let mall = mall(MallStyle::Alpha, None).await;
    let gw = gateway(1, &[mall.addr()]).await;
    let proxy = port(&gw, "exit-01");
    let (name, value) = auth();
    let headers = [(name, value.as_str())];
    // A loopback listener that is NOT allowed must never see a connection.
    let bystander = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let bystander_addr = bystander.local_addr().expect("addr");

    let mut conn = HttpConn::open(proxy).await;
    let google = conn.get("http://www.google.com/", &headers).await;
    assert_eq!(google.status, 403);
    let loopback = conn
        .get(&format!("http://{bystander_addr}/"), &headers)
        .await;
    assert_eq!(loopback.status, 403);
    let localhost_other_port = conn
        .get(
            &format!("http://localhost:{}/", bystander_addr.port()),
            &headers,
        )
        .await;
    assert_eq!(localhost_other_port.status, 403);
    let https = format!(
        "CONNECT clients2.google.com:443 HTTP/1.1\r\nHost: clients2.google.com:443\r\nProxy-Authorization: {value}\r\n\r\n"
    );
    let (_stream, head) = raw_head(proxy, &https).await;
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");

    let accepted = tokio::time::timeout(Duration::from_millis(200), bystander.accept()).await;
    assert!(
        accepted.is_err(),
        "the gateway connected to a disallowed address"
    );
    let stats = gw.port_stats("exit-01").expect("stats");
    assert_eq!(stats.refused, 4);
    assert_eq!(stats.forwarded, 0);
    assert_eq!(stats.tunnels, 0);
    gw.shutdown().await;
    mall.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn forwards_origin_form_with_exit_ip_header() {
    let (origin, head) = echo_server().await;
    let gw = gateway(3, &[origin]).await;
    let (name, value) = auth();
    let reply = HttpConn::open(port(&gw, "exit-02"))
        .await
        .get(
            &format!("http://{origin}/search?q=%EC%82%BC"),
            &[
                (name, value.as_str()),
                ("x-lps-exit-ip", "spoofed"),
                ("proxy-connection", "keep-alive"),
            ],
        )
        .await;
    assert_eq!(reply.status, 200);
    let head = head.await.expect("echo").to_ascii_lowercase();
    assert!(
        head.starts_with("get /search?q=%ec%82%bc http/1.1\r\n"),
        "{head}"
    );
    assert!(head.contains("\r\nx-lps-exit-ip: exit-02\r\n"), "{head}");
    assert!(!head.contains("spoofed"), "client value replaced: {head}");
    assert!(
        !head.contains("proxy-authorization"),
        "credentials not forwarded: {head}"
    );
    assert!(!head.contains("proxy-connection"), "{head}");
    assert!(head.contains(&format!("\r\nhost: {origin}\r\n")), "{head}");
    gw.shutdown().await;
}

#[tokio::test]
async fn mall_counts_and_blocks_per_exit_port() {
    let mall = mall(MallStyle::Beta, Some(1)).await;
    let gw = gateway(3, &[mall.addr()]).await;
    let (name, value) = auth();
    let headers = [(name, value.as_str())];
    let search = format!("{}/search?q={}", mall.base_url(), enc("햇반"));

    let mut exit1 = HttpConn::open(port(&gw, "exit-01")).await;
    let first = exit1.get(&search, &headers).await.text();
    assert!(!first.contains("px-captcha"), "first search allowed");
    let second = exit1.get(&search, &headers).await.text();
    assert!(
        second.contains(&markup::block_marker_html(MallStyle::Beta)),
        "second search from exit-01 blocked: {second}"
    );
    let other = HttpConn::open(port(&gw, "exit-02"))
        .await
        .get(&search, &headers)
        .await
        .text();
    assert!(!other.contains("px-captcha"), "exit-02 has its own budget");

    let stats = mall.stats();
    assert_eq!(stats.searches.get("exit-01"), Some(&2));
    assert_eq!(stats.searches.get("exit-02"), Some(&1));
    assert_eq!(stats.blocked, 1);
    assert!(!stats.searches.contains_key("direct"));
    gw.shutdown().await;
    mall.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn connect_tunnels_to_an_allowed_address() {
    let mall = mall(MallStyle::Alpha, None).await;
    let gw = gateway(1, &[mall.addr()]).await;
    let (_, value) = auth();
    let target = mall.addr();
    let connect = format!(
        "CONNECT {target} HTTP/1.1\r\nHost: {target}\r\nProxy-Authorization: {value}\r\n\r\n"
    );
    let (mut stream, head) = raw_head(port(&gw, "exit-01"), &connect).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let request = format!(
        "GET /api/search?q={} HTTP/1.1\r\nHost: {target}\r\nConnection: close\r\n\r\n",
        enc("신라면 120g 5개입")
    );
    stream.write_all(request.as_bytes()).await.expect("write");
    let response = read_to_close(&mut stream).await;
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.contains("\"id\":\"a103\""), "{response}");

    let stats = gw.port_stats("exit-01").expect("stats");
    assert_eq!(stats.tunnels, 1);
    assert!(stats.bytes_to_client > u64::try_from(response.len()).expect("fits"));
    // A tunnel is opaque: the mall sees no exit-IP header.
    assert_eq!(mall.stats().requests.get("direct"), Some(&1));
    gw.shutdown().await;
    mall.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn keep_alive_and_per_port_stats() {
    let mall = mall(MallStyle::Alpha, None).await;
    let gw = gateway(3, &[mall.addr()]).await;
    let (name, value) = auth();
    let headers = [(name, value.as_str())];
    let img = format!("{}/img/a101.jpg", mall.base_url());

    let mut conn = HttpConn::open(port(&gw, "exit-01")).await;
    for _ in 0..3 {
        let reply = conn.get(&img, &headers).await;
        assert_eq!(reply.status, 200);
        assert_eq!(reply.body.len(), lps_test_kit::mall::IMAGE_BYTES);
    }
    HttpConn::open(port(&gw, "exit-02"))
        .await
        .get(&format!("{}/", mall.base_url()), &headers)
        .await;

    let stats = gw.stats();
    assert_eq!(stats.len(), 3);
    let [one, two, three] = [&stats[0], &stats[1], &stats[2]];
    assert_eq!(
        (one.label.as_str(), two.label.as_str()),
        ("exit-01", "exit-02")
    );
    assert_eq!(one.connections, 1, "keep-alive: one connection");
    assert_eq!(one.requests, 3);
    assert_eq!(one.forwarded, 3);
    let three_images = 3 * u64::try_from(lps_test_kit::mall::IMAGE_BYTES).expect("fits");
    assert!(
        one.bytes_to_client > three_images,
        "{}",
        one.bytes_to_client
    );
    assert!(one.bytes_from_client > 0);
    assert_eq!((two.connections, two.requests), (1, 1));
    assert!(two.bytes_to_client < one.bytes_to_client);
    assert_eq!(
        (three.connections, three.requests, three.bytes_to_client),
        (0, 0, 0)
    );
    assert_eq!(mall.stats().requests.get("exit-01"), Some(&3));
    gw.shutdown().await;
    mall.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn not_a_proxy_request_is_400() {
    let gw = Gateway::start(GatewayConfig::new(1))
        .await
        .expect("gateway");
    let (_stream, head) = raw_head(
        port(&gw, "exit-01"),
        "GET /search HTTP/1.1\r\nHost: example\r\n\r\n",
    )
    .await;
    assert!(head.starts_with("HTTP/1.1 400"), "{head}");
    gw.shutdown().await;
}

#[tokio::test]
async fn without_credentials_configured_no_auth_is_needed() {
    let mall = mall(MallStyle::Beta, None).await;
    let gw = Gateway::start(GatewayConfig::new(1).allow(mall.addr()))
        .await
        .expect("gateway");
    let reply = HttpConn::open(port(&gw, "exit-01"))
        .await
        .get(&format!("{}/api/search?q=x", mall.base_url()), &[])
        .await;
    assert_eq!(reply.status, 200);
    gw.shutdown().await;
    mall.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn rejects_non_loopback_config() {
    let err = Gateway::start(GatewayConfig::new(1).allow("10.1.2.3:80"))
        .await
        .expect_err("non-loopback target");
    assert!(matches!(err, GatewayError::NotLoopback(_)), "{err}");
    let err = Gateway::start(GatewayConfig::new(1).allow("mall.example:80"))
        .await
        .expect_err("hostname target");
    assert!(matches!(err, GatewayError::BadAllowEntry(_)), "{err}");
}

#[tokio::test]
async fn shutdown_closes_ports_and_tunnels() {
    let mall = mall(MallStyle::Alpha, None).await;
    let gw = gateway(2, &[mall.addr()]).await;
    let (_, value) = auth();
    let proxy = port(&gw, "exit-02");
    let target = mall.addr();
    let connect = format!("CONNECT {target} HTTP/1.1\r\nProxy-Authorization: {value}\r\n\r\n");
    let (mut tunnel, head) = raw_head(proxy, &connect).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");

    tokio::time::timeout(Duration::from_secs(10), gw.shutdown())
        .await
        .expect("shutdown is bounded");
    assert!(tokio::net::TcpStream::connect(proxy).await.is_err());
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), tunnel.read_to_end(&mut rest)).await;
    assert!(closed.is_ok(), "tunnel closed by shutdown");
    mall.shutdown().await.expect("shutdown");
}
