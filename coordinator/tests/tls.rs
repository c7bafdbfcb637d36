//! TLS and mTLS on the coordinator's gRPC port, end to end: the real coordinator on
//! 127.0.0.1:0 serving TLS with certificates made at test time (rcgen: a CA, a server
//! certificate for 127.0.0.1/localhost, node client certificates from that CA and from
//! another one), real crawler nodes (`lps_crawler_node::Node` with the scripted executor)
//! and generated SearchService clients dialling over TLS (lpsctl over TLS is
//! tested in its own crate, `cli/tests/tls.rs`). Outcomes
//! are read from the database.

use std::{path::Path, time::Duration};

use clap::Parser as _;
use lps_coordinator::{
    app::Running,
    config::{Cli, ConfigError, ServeArgs},
    db::MIGRATOR,
};
use lps_crawler_node::{
    config::Config as NodeConfig,
    executor::ScriptedExecutor,
    node::{Node, NodeError},
};
use lps_proto::pb::{self, search_service_client::SearchServiceClient};
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;
use tonic::{
    Code, Request,
    transport::{Certificate, Channel, ClientTlsConfig, Endpoint},
};

mod common;

use common::{
    CLIENT_TOKEN, NODE_TOKEN,
    pki::{MALL, Pki, coordinator},
};

/// A node dialling `https://127.0.0.1:<port>`, trusting `ca.crt`, presenting `identity`
/// (`"node"`, `"rogue"`) when given.
fn node(running: &Running, pki: &Pki, identity: Option<&str>) -> Node {
    Node::new(node_config(running, pki, identity), ScriptedExecutor::new())
}

/// The configuration of [`node`].
fn node_config(running: &Running, pki: &Pki, identity: Option<&str>) -> NodeConfig {
    let mut config = NodeConfig::new(format!("https://{}", running.grpc_addr), NODE_TOKEN);
    config.node_id = "node-1".into();
    config.slots = 1;
    config.drain_timeout = Duration::from_secs(5);
    // Refusals that look like an unreachable coordinator end the node after this long.
    config.reconnect_deadline = Duration::from_secs(3);
    config.tls_ca = Some(pki.path("ca.crt"));
    if let Some(name) = identity {
        config.tls_cert = Some(pki.path(&format!("{name}.crt")));
        config.tls_key = Some(pki.path(&format!("{name}.key")));
    }
    config
}

/// A SearchService client over TLS trusting `ca.crt`, without a client certificate.
async fn search_client(running: &Running, pki: &Pki) -> SearchServiceClient<Channel> {
    let tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(pki.read("ca.crt")));
    let channel = Endpoint::from_shared(format!("https://{}", running.grpc_addr))
        .unwrap()
        .tls_config(tls)
        .unwrap()
        .connect()
        .await
        .unwrap();
    SearchServiceClient::new(channel)
}

fn search_request(names: &[&str]) -> pb::SearchRequest {
    pb::SearchRequest {
        products: names
            .iter()
            .map(|n| pb::Product {
                code: String::new(),
                name: (*n).to_owned(),
                ..Default::default()
            })
            .collect(),
        malls: vec![MALL.to_owned()],
        priority_class: pb::PriorityClass::Interactive as i32,
        ..Default::default()
    }
}

async fn scalar(pool: &PgPool, sql: &'static str) -> i64 {
    sqlx::query_scalar::<_, i64>(sql)
        .fetch_one(pool)
        .await
        .unwrap()
}

async fn wait_for_count(pool: &PgPool, sql: &'static str, want: i64) -> i64 {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let n = scalar(pool, sql).await;
        if n == want || tokio::time::Instant::now() > deadline {
            return n;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Runs `node` until it ends by itself (it is expected to be refused).
async fn run_to_refusal(node: Node) -> NodeError {
    tokio::time::timeout(Duration::from_secs(60), node.run(CancellationToken::new()))
        .await
        .expect("the node neither connected nor gave up")
        .expect_err("the node ran and stopped cleanly")
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_node_with_a_client_certificate_completes_a_job_over_mtls(pool: PgPool) {
    let pki = Pki::new("mtls-ok");
    let c = coordinator(&pool, &pki, true).await;

    // The search comes over TLS without a client certificate: only nodes need one.
    let mut search = search_client(&c, &pki).await;
    let accepted = search
        .search(common::with_token(
            search_request(&["ok:12900"]),
            CLIENT_TOKEN,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(accepted.items.len(), 1);

    let node = node(&c, &pki, Some("node"));
    let stop = CancellationToken::new();
    let task = tokio::spawn(node.run(stop.clone()));
    let done = wait_for_count(&pool, "select count(*) from job where state = 'done'", 1).await;
    assert_eq!(done, 1, "the job was not completed over mTLS");
    assert_eq!(
        scalar(
            &pool,
            "select count(*) from offer where price = 12900 and mall = 'testmall-alpha'"
        )
        .await,
        1
    );
    assert_eq!(
        scalar(
            &pool,
            "select count(*) from job_attempt where node_id = 'node-1' and ended = 'done'"
        )
        .await,
        1
    );
    stop.cancel();
    task.await.unwrap().unwrap();
    c.shutdown().await;
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn with_a_client_ca_a_node_without_a_certificate_is_refused(pool: PgPool) {
    let pki = Pki::new("mtls-none");
    let c = coordinator(&pool, &pki, true).await;
    let job = c
        .queue
        .enqueue(
            &lps_proto::model::SearchRequest::try_from(search_request(&["ok"])).unwrap(),
            &Default::default(),
        )
        .await
        .unwrap();
    assert_eq!(job.items.len(), 1);

    let err = run_to_refusal(node(&c, &pki, None)).await;
    match &err {
        NodeError::Refused { code, message, .. } => {
            assert_eq!(*code, Code::Unauthenticated, "{err}");
            assert!(message.contains("client certificate"), "{err}");
        }
        other => panic!("expected a refusal, got {other}"),
    }
    assert_eq!(scalar(&pool, "select count(*) from node_session").await, 0);
    assert_eq!(
        scalar(
            &pool,
            "select count(*) from job where state = 'queued' and lease_epoch = 0"
        )
        .await,
        1,
        "the refused node got work"
    );
    c.shutdown().await;
}

/// With mTLS the certificate names the node: a good certificate for `node-1` used with
/// another node id is refused with PERMISSION_DENIED naming both, and gets no work; an id
/// the certificate's name prefixes (`node-1-<pid>`) is accepted.
#[sqlx::test(migrator = "MIGRATOR")]
async fn with_mtls_a_node_id_its_certificate_does_not_name_is_refused(pool: PgPool) {
    let pki = Pki::new("mtls-id");
    let c = coordinator(&pool, &pki, true).await;
    c.queue
        .enqueue(
            &lps_proto::model::SearchRequest::try_from(search_request(&["ok"])).unwrap(),
            &Default::default(),
        )
        .await
        .unwrap();

    let mut other = node_config(&c, &pki, Some("node"));
    other.node_id = "node-2".into();
    let err = run_to_refusal(Node::new(other, ScriptedExecutor::new())).await;
    match &err {
        NodeError::Refused { code, message, .. } => {
            assert_eq!(*code, Code::PermissionDenied, "{err}");
            assert!(
                message.contains("\"node-2\"") && message.contains("node-1"),
                "{err}"
            );
        }
        other => panic!("expected a refusal, got {other}"),
    }
    assert_eq!(
        scalar(
            &pool,
            "select count(*) from job where state = 'queued' and lease_epoch = 0"
        )
        .await,
        1,
        "the refused node got work"
    );

    let mut covered = node_config(&c, &pki, Some("node"));
    covered.node_id = "node-1-4711".into();
    let stop = CancellationToken::new();
    let task = tokio::spawn(Node::new(covered, ScriptedExecutor::new()).run(stop.clone()));
    let done = wait_for_count(&pool, "select count(*) from job where state = 'done'", 1).await;
    assert_eq!(
        done, 1,
        "a node id the certificate's name prefixes was refused"
    );
    stop.cancel();
    task.await.unwrap().unwrap();
    c.shutdown().await;
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_node_with_a_certificate_from_another_ca_is_refused(pool: PgPool) {
    let pki = Pki::new("mtls-rogue");
    let c = coordinator(&pool, &pki, true).await;

    // The coordinator fails the handshake with an alert; to the node that is a connection
    // that breaks (it cannot tell a bad certificate from a coordinator restarting behind
    // a TLS terminator), retried until LPS_RECONNECT_DEADLINE, and its last error names
    // the alert.
    let err = run_to_refusal(node(&c, &pki, Some("rogue"))).await;
    match &err {
        NodeError::CoordinatorLost { last_error, .. } => {
            assert!(last_error.contains("UnknownCA"), "{err}");
        }
        other => panic!("expected a lost coordinator after TLS failures, got {other}"),
    }
    assert_eq!(scalar(&pool, "select count(*) from node_session").await, 0);

    // The failed handshakes did not hurt the server: a good node still gets in.
    let good = node(&c, &pki, Some("node"));
    let handle = good.handle();
    let stop = CancellationToken::new();
    let task = tokio::spawn(good.run(stop.clone()));
    tokio::time::timeout(
        Duration::from_secs(30),
        handle.wait_for(|s| s.stream_id.is_some()),
    )
    .await
    .expect("the good node did not connect");
    stop.cancel();
    task.await.unwrap().unwrap();
    c.shutdown().await;
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn tls_without_a_client_ca_accepts_nodes_without_certificates(pool: PgPool) {
    let pki = Pki::new("tls-only");
    let c = coordinator(&pool, &pki, false).await;
    let mut search = search_client(&c, &pki).await;
    search
        .search(common::with_token(
            search_request(&["ok:500"]),
            CLIENT_TOKEN,
        ))
        .await
        .unwrap();
    let stop = CancellationToken::new();
    let task = tokio::spawn(node(&c, &pki, None).run(stop.clone()));
    let done = wait_for_count(&pool, "select count(*) from job where state = 'done'", 1).await;
    assert_eq!(done, 1);
    stop.cancel();
    task.await.unwrap().unwrap();
    c.shutdown().await;
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn search_over_tls_needs_the_bearer_token_but_no_client_certificate(pool: PgPool) {
    let pki = Pki::new("search");
    let c = coordinator(&pool, &pki, true).await;
    let mut search = search_client(&c, &pki).await;

    let err = search
        .search(Request::new(search_request(&["ok"])))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unauthenticated, "{err:?}");
    assert_eq!(scalar(&pool, "select count(*) from job").await, 0);

    let accepted = search
        .search(common::with_token(search_request(&["ok"]), CLIENT_TOKEN))
        .await
        .unwrap()
        .into_inner();
    let status = search
        .get_search(common::with_token(
            pb::GetSearchRequest {
                search_id: accepted.search_id,
            },
            CLIENT_TOKEN,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status.search_id, accepted.search_id);
    assert_eq!(scalar(&pool, "select count(*) from job").await, 1);
    c.shutdown().await;
}

/// GET `url` with a client trusting `ca` (none: the system roots only); the status and
/// body, or the error chain.
async fn get(url: &str, ca: Option<&[u8]>) -> Result<(u16, String), String> {
    let mut client = reqwest::Client::builder().timeout(Duration::from_secs(30));
    if let Some(ca) = ca {
        client = client.tls_certs_only([reqwest::Certificate::from_pem(ca).unwrap()]);
    }
    let chain = |e: reqwest::Error| {
        let mut text = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(cause) = source {
            text.push_str(&format!(": {cause}"));
            source = cause.source();
        }
        text
    };
    let response = client
        .build()
        .unwrap()
        .get(url)
        .send()
        .await
        .map_err(chain)?;
    let status = response.status().as_u16();
    Ok((status, response.text().await.map_err(chain)?))
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn the_http_port_stays_plain_unless_lps_http_tls(pool: PgPool) {
    let pki = Pki::new("http");
    let ca = pki.read("ca.crt");

    // gRPC TLS alone: probes and scrapes keep plain HTTP.
    let plain = coordinator(&pool, &pki, true).await;
    let readyz = format!("http://{}/readyz", plain.http_addr);
    assert_eq!(get(&readyz, None).await, Ok((200, "ready".to_owned())));
    plain.shutdown().await;

    let (cert, key) = (pki.arg("server.crt"), pki.arg("server.key"));
    let tls = common::start(
        &pool,
        &[
            "--tls-cert",
            &cert,
            "--tls-key",
            &key,
            "--http-tls",
            "true",
            "--malls",
            MALL,
        ],
    )
    .await;
    let port = tls.http_addr.port();
    for (path, body) in [
        ("healthz", Some("ok")),
        ("readyz", Some("ready")),
        ("metrics", None),
    ] {
        let (status, text) = get(&format!("https://localhost:{port}/{path}"), Some(&ca))
            .await
            .unwrap();
        assert_eq!(status, 200, "/{path}: {text}");
        if let Some(body) = body {
            assert_eq!(text, body, "/{path}");
        }
    }
    // Plaintext is not served, and the certificate is the gRPC port's.
    get(&format!("http://127.0.0.1:{port}/healthz"), None)
        .await
        .expect_err("plain HTTP was served");
    let err = get(&format!("https://127.0.0.1:{port}/healthz"), None)
        .await
        .unwrap_err();
    assert!(err.to_lowercase().contains("certificate"), "{err}");
    // A connection that never starts its handshake does not keep the next client out.
    let silent = tokio::net::TcpStream::connect(tls.http_addr).await.unwrap();
    assert_eq!(
        get(&format!("https://127.0.0.1:{port}/healthz"), Some(&ca)).await,
        Ok((200, "ok".to_owned()))
    );
    drop(silent);
    // The gRPC port still speaks TLS.
    search_client(&tls, &pki)
        .await
        .search(common::with_token(search_request(&["ok"]), CLIENT_TOKEN))
        .await
        .unwrap();
    tls.shutdown().await;
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn plaintext_to_the_tls_port_fails(pool: PgPool) {
    let pki = Pki::new("plaintext");
    let c = coordinator(&pool, &pki, false).await;

    let plain = Endpoint::from_shared(format!("http://{}", c.grpc_addr))
        .unwrap()
        .connect_timeout(Duration::from_secs(5));
    let call = async {
        let channel = plain.connect().await?;
        SearchServiceClient::new(channel)
            .search(common::with_token(search_request(&["ok"]), CLIENT_TOKEN))
            .await
            .map_err(Into::<Box<dyn std::error::Error + Send + Sync>>::into)
    };
    let result = tokio::time::timeout(Duration::from_secs(30), call)
        .await
        .expect("the plaintext call hung");
    assert!(result.is_err(), "a plaintext call was served");

    // A plaintext node is not served either.
    let mut config = NodeConfig::new(format!("http://{}", c.grpc_addr), NODE_TOKEN);
    config.node_id = "node-plain".into();
    config.reconnect_deadline = Duration::from_secs(3);
    let err = run_to_refusal(Node::new(config, ScriptedExecutor::new())).await;
    assert!(
        matches!(err, NodeError::CoordinatorLost { .. }),
        "expected a lost coordinator, got {err}"
    );
    assert_eq!(scalar(&pool, "select count(*) from job").await, 0);
    assert_eq!(scalar(&pool, "select count(*) from node_session").await, 0);

    // TLS callers are still served.
    search_client(&c, &pki)
        .await
        .search(common::with_token(search_request(&["ok"]), CLIENT_TOKEN))
        .await
        .unwrap();
    c.shutdown().await;
}

/// `serve` with the test tokens and `extra`, as `Cli` parses it.
fn parse(extra: &[&str]) -> ServeArgs {
    let mut argv = vec![
        "coordinator",
        "--database-url",
        "postgres://unused",
        "--client-tokens",
        CLIENT_TOKEN,
        "--node-tokens",
        NODE_TOKEN,
    ];
    argv.extend_from_slice(extra);
    Cli::try_parse_from(argv).unwrap().serve
}

fn config_error(extra: &[&str]) -> ConfigError {
    parse(extra)
        .validate()
        .expect_err("the configuration was accepted")
}

fn args<'a>(pairs: &'a [(&'a str, String)]) -> Vec<&'a str> {
    pairs
        .iter()
        .flat_map(|(flag, value)| [*flag, value.as_str()])
        .collect()
}

/// `--tls-cert cert --tls-key key` and, when given, `--tls-client-ca ca`.
fn tls_flags(cert: String, key: String, ca: Option<String>) -> Vec<(&'static str, String)> {
    let mut pairs = vec![("--tls-cert", cert), ("--tls-key", key)];
    pairs.extend(ca.map(|ca| ("--tls-client-ca", ca)));
    pairs
}

/// Flags and values, the setting the error must name, and a phrase of its reason.
type ConfigCase = (Vec<(&'static str, String)>, &'static str, &'static str);

#[test]
fn tls_settings_that_do_not_fit_are_named() {
    let pki = Pki::new("config");
    let missing = |dir: &str| path_arg(&pki.dir.join(dir).join("missing.pem"));
    let p = |file: &str| pki.arg(file);
    let cases: Vec<ConfigCase> = vec![
        (
            vec![("--tls-cert", p("server.crt"))],
            "LPS_TLS_KEY",
            "required",
        ),
        (
            vec![("--tls-key", p("server.key"))],
            "LPS_TLS_CERT",
            "required",
        ),
        (
            vec![("--tls-client-ca", p("ca.crt"))],
            "LPS_TLS_CLIENT_CA",
            "needs TLS",
        ),
        (
            vec![("--http-tls", "true".to_owned())],
            "LPS_HTTP_TLS",
            "needs LPS_TLS_CERT",
        ),
        (
            tls_flags(missing("a"), p("server.key"), None),
            "LPS_TLS_CERT",
            "cannot read",
        ),
        (
            tls_flags(p("server.crt"), missing("b"), None),
            "LPS_TLS_KEY",
            "cannot read",
        ),
        (
            tls_flags(p("server.crt"), p("server.key"), Some(missing("c"))),
            "LPS_TLS_CLIENT_CA",
            "cannot read",
        ),
        // A key file given as the certificate: no certificate in it.
        (
            tls_flags(p("server.key"), p("server.key"), None),
            "LPS_TLS_CERT",
            "no PEM certificate",
        ),
        // A certificate given as the key.
        (
            tls_flags(p("server.crt"), p("server.crt"), None),
            "LPS_TLS_KEY",
            "no PEM private key",
        ),
        // A key of another certificate.
        (
            tls_flags(p("server.crt"), p("other.key"), None),
            "LPS_TLS_KEY",
            "not usable with LPS_TLS_CERT",
        ),
        (
            tls_flags(p("server.crt"), p("server.key"), Some(p("node.key"))),
            "LPS_TLS_CLIENT_CA",
            "no PEM certificate",
        ),
    ];
    for (pairs, setting, reason) in &cases {
        let e = config_error(&args(pairs));
        assert_eq!(e.setting, *setting, "{pairs:?}: {e}");
        assert!(e.reason.contains(reason), "{pairs:?}: {e}");
    }

    // The good files validate, and the key stays out of the config's Debug text.
    let good = tls_flags(p("server.crt"), p("server.key"), Some(p("ca.crt")));
    let config = parse(&args(&good)).validate().unwrap();
    let tls = config.tls.as_ref().expect("TLS is configured");
    assert!(tls.requires_client_cert());
    let key = String::from_utf8(pki.read("server.key")).unwrap();
    let key_body = key.lines().nth(1).unwrap();
    assert!(!format!("{config:?}").contains(key_body));
}

fn path_arg(path: &Path) -> String {
    path.to_str().unwrap().to_owned()
}
