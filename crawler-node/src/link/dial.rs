//! Dialling the coordinator: the [`Endpoint`] every attempt uses (keep-alives, TLS from
//! the configured PEM files) and one attempt, [`open`]: a fresh channel, the bearer token,
//! `Hello`, and the `Welcome` that must come first. Stateless; an attempt that is dropped
//! mid-way just closes its connection.

use std::time::Duration;

use lps_proto::pb::{
    self, coordinator_message::Body as In, node_message::Body as Out,
    node_service_client::NodeServiceClient,
};
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::{
    Request, Status, Streaming,
    metadata::{Ascii, MetadataValue},
    transport::{Certificate, ClientTlsConfig, Endpoint, Identity},
};
use tracing::debug;

use crate::{
    config::{Config, ConfigError},
    state::NodeError,
};

/// Connecting, sending Hello and receiving Welcome must finish within this.
const OPEN_TIMEOUT: Duration = Duration::from_secs(15);
/// TCP connect timeout of one attempt.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// HTTP/2 keep-alive pings find a dead connection even when no frame is due.
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(10);

/// A stream that answered Hello with Welcome.
pub(super) struct Opened {
    pub(super) out: mpsc::UnboundedSender<pb::NodeMessage>,
    pub(super) inbound: Streaming<pb::CoordinatorMessage>,
    pub(super) welcome: pb::Welcome,
}

/// One connection attempt: channel, Hello, Welcome.
pub(super) async fn open(
    endpoint: Endpoint,
    auth: MetadataValue<Ascii>,
    hello: pb::Hello,
) -> Result<Box<Opened>, Status> {
    let attempt = async {
        let channel = endpoint.connect().await.map_err(|err| {
            Status::unavailable(format!("cannot reach the coordinator: {}", chain(&err)))
        })?;
        let mut client = NodeServiceClient::new(channel);
        let (out, rx) = mpsc::unbounded_channel();
        let held = hello.running.len();
        let _ = out.send(pb::NodeMessage {
            body: Some(Out::Hello(hello)),
        });
        let mut request = Request::new(UnboundedReceiverStream::new(rx));
        request.metadata_mut().insert("authorization", auth);
        // The coordinator's `grpc.connect` continues this call's span (`node.connect`).
        lps_telemetry::inject_metadata(request.metadata_mut());
        debug!(held, "hello sent");
        let mut inbound = client.connect(request).await?.into_inner();
        match inbound.message().await? {
            Some(pb::CoordinatorMessage {
                body: Some(In::Welcome(welcome)),
            }) => Ok(Box::new(Opened {
                out,
                inbound,
                welcome,
            })),
            Some(other) => Err(Status::internal(format!(
                "expected a welcome first, got {other:?}"
            ))),
            None => Err(Status::unavailable(
                "the coordinator ended the stream before its welcome",
            )),
        }
    };
    tokio::time::timeout(OPEN_TIMEOUT, attempt)
        .await
        .unwrap_or_else(|_| {
            Err(Status::deadline_exceeded(format!(
                "no welcome within {OPEN_TIMEOUT:?}"
            )))
        })
}

/// An error and its sources, `: `-separated.
pub(super) fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The endpoint every attempt connects with (TLS from the config's PEM files).
pub(super) fn endpoint(config: &Config) -> Result<Endpoint, NodeError> {
    let bad =
        |setting: &'static str, reason: String| NodeError::Config(ConfigError { setting, reason });
    let mut endpoint = Endpoint::from_shared(config.coordinator_url.trim().to_owned())
        .map_err(|e| bad("LPS_COORDINATOR_URL", e.to_string()))?
        .connect_timeout(CONNECT_TIMEOUT)
        .http2_keep_alive_interval(KEEPALIVE_INTERVAL)
        .keep_alive_timeout(KEEPALIVE_TIMEOUT)
        .keep_alive_while_idle(true)
        .tcp_nodelay(true);
    if let Some(ca) = &config.tls_ca {
        let read = |setting: &'static str, path: &std::path::Path| {
            std::fs::read(path).map_err(|e| bad(setting, format!("{}: {e}", path.display())))
        };
        let mut tls =
            ClientTlsConfig::new().ca_certificate(Certificate::from_pem(read("LPS_TLS_CA", ca)?));
        if let (Some(cert), Some(key)) = (&config.tls_cert, &config.tls_key) {
            tls = tls.identity(Identity::from_pem(
                read("LPS_TLS_CERT", cert)?,
                read("LPS_TLS_KEY", key)?,
            ));
        }
        endpoint = endpoint
            .tls_config(tls)
            .map_err(|e| bad("LPS_TLS_CA", chain(&e)))?;
    }
    Ok(endpoint)
}
