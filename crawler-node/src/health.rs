//! The node's HTTP probes (`LPS_HTTP_ADDR`):
//! - `GET /healthz`: 200 while [`Node::run`](crate::Node::run) runs and its loop ticked
//!   recently, else 503 (the liveness and startup probes);
//! - `GET /readyz`: 200 while the stream is connected and welcomed, else 503.
//!
//! Read-only: it looks at a [`NodeHandle`] and never changes the node. The server stops
//! accepting when `shutdown` is cancelled.

use axum::{Router, extract::State, http::StatusCode, routing::get};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::node::NodeHandle;

/// The probe routes.
pub fn router(node: NodeHandle) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(node)
}

/// Serves the probes on `listener` until `shutdown` is cancelled.
pub async fn serve(
    listener: TcpListener,
    node: NodeHandle,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    axum::serve(listener, router(node))
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await
}

async fn healthz(State(node): State<NodeHandle>) -> (StatusCode, &'static str) {
    if node.is_alive() {
        (StatusCode::OK, "ok\n")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "stopped\n")
    }
}

async fn readyz(State(node): State<NodeHandle>) -> (StatusCode, &'static str) {
    if node.is_ready() {
        (StatusCode::OK, "ready\n")
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "not connected to the coordinator\n",
        )
    }
}
