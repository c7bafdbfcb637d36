//! `NodeService.Connect` adapter: authenticates the stream (bearer token, and with mTLS a
//! verified client certificate on the connection), reads and validates `Hello`,
//! and hands the stream to a [`crate::dispatch::stream`] task. Everything after Hello is
//! the stream task's business.

use std::{sync::Arc, time::Duration};

use lps_proto::{
    PROTOCOL_VERSION,
    model::Hello,
    pb::{self, node_message::Body as In, node_service_server::NodeService},
};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};
use tracing::Instrument as _;
use uuid::Uuid;

use crate::{
    auth::{Role, Tokens},
    dispatch::{Dispatcher, stream},
};

/// How long a node may take to send Hello after opening the stream.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone)]
pub struct NodeApi {
    dispatcher: Dispatcher,
    tokens: Arc<Tokens>,
    require_client_cert: bool,
}

impl NodeApi {
    pub fn new(dispatcher: Dispatcher, tokens: Arc<Tokens>) -> Self {
        Self {
            dispatcher,
            tokens,
            require_client_cert: false,
        }
    }

    /// Refuse streams whose connection presented no client certificate (mTLS on, see
    /// [`crate::tls`]).
    pub fn require_client_cert(mut self, require: bool) -> Self {
        self.require_client_cert = require;
        self
    }
}

#[tonic::async_trait]
impl NodeService for NodeApi {
    type ConnectStream = ReceiverStream<Result<pb::CoordinatorMessage, Status>>;

    async fn connect(
        &self,
        request: Request<Streaming<pb::NodeMessage>>,
    ) -> Result<Response<Self::ConnectStream>, Status> {
        // The server side of the node's `node.connect`: until the stream is handed to its
        // stream task (which is not part of this span: it lives as long as the stream).
        let span = tracing::info_span!(
            "grpc.connect",
            otel.kind = "server",
            rpc.system = "grpc",
            rpc.service = "lps.v1.NodeService",
            rpc.method = "Connect",
            node.id = tracing::field::Empty,
        );
        if let Some((parent, state)) = lps_telemetry::parent_from_metadata(request.metadata()) {
            lps_telemetry::set_parent(&span, &parent, &state);
        }
        let result = self.open(request).instrument(span.clone()).await;
        if let Err(status) = &result {
            lps_telemetry::fail(&span, status.message());
        }
        result
    }
}

impl NodeApi {
    /// Authenticates the stream, reads its Hello and starts its task.
    async fn open(
        &self,
        request: Request<Streaming<pb::NodeMessage>>,
    ) -> Result<Response<ReceiverStream<Result<pb::CoordinatorMessage, Status>>>, Status> {
        if self.require_client_cert {
            crate::tls::require_client_cert(&request)?;
        }
        self.tokens.check(request.metadata(), Role::Node)?;
        let metadata = &request.metadata().clone();
        let certs = request.peer_certs();
        if self.dispatcher.shutdown.is_cancelled() {
            return Err(super::unavailable(
                "coordinator is shutting down; connect to another replica",
                Duration::from_millis(200),
            ));
        }
        let mut inbound = request.into_inner();
        let first = tokio::time::timeout(HELLO_TIMEOUT, inbound.message())
            .await
            .map_err(|_| Status::deadline_exceeded("no hello within 10s"))??
            .ok_or_else(|| Status::failed_precondition("stream closed before hello"))?;
        let Some(In::Hello(hello)) = first.body else {
            return Err(Status::failed_precondition(
                "expected hello as the first message",
            ));
        };
        if hello.protocol_version != PROTOCOL_VERSION {
            return Err(Status::failed_precondition(format!(
                "protocol_version {} not supported, want {PROTOCOL_VERSION}",
                hello.protocol_version
            )));
        }
        let hello = Hello::try_from(hello).map_err(|e| super::invalid(e.under("hello")))?;
        self.tokens.check_node_id(metadata, &hello.node_id)?;
        if self.require_client_cert
            && let Some(certs) = &certs
        {
            crate::tls::check_node_id(certs, &hello.node_id)?;
        }
        let (tx, rx) = mpsc::channel(256);
        let stream_id = Uuid::new_v4();
        tracing::Span::current().record("node.id", hello.node_id.as_str());
        // NB: a root for logs only, so it neither keeps `grpc.connect` open nor is the
        // parent of what the stream task does (see `lps_telemetry::LOG_ONLY`).
        let span = tracing::info_span!(parent: None, "node.stream", node.id = %hello.node_id, log_only = true);
        self.dispatcher.streams.spawn(
            stream::run(self.dispatcher.clone(), hello, stream_id, inbound, tx).instrument(span),
        );
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}
