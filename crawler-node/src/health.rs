//! The node's HTTP endpoints (`LPS_HTTP_ADDR`):
//! - `GET /healthz`: 200 while [`Node::run`](crate::Node::run) runs and its loop ticked
//!   recently, else 503 (the liveness and startup probes). That loop enforces every job's
//!   hard deadline and drops a run that does not stop within its grace, so "the loop ticks"
//!   also means no hung browser call can hold a slot for long;
//! - `GET /readyz`: 200 while the stream is connected and welcomed and the executor is
//!   ready (the browser executor's chromedriver is not down), else 503 saying which;
//! - `GET /metrics`: the node's [`NodeMetrics`](crate::NodeMetrics) in the Prometheus text
//!   format 0.0.4, or OpenMetrics when the scraper's `Accept` asks for it.
//!
//! Read-only: it looks at a [`NodeHandle`] and never changes the node. The server stops
//! accepting when `shutdown` is cancelled.

use axum::{
    Router,
    extract::State,
    http::{StatusCode, header},
    response::IntoResponse,
    routing::get,
};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::node::NodeHandle;

/// The routes.
pub fn router(node: NodeHandle) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(node)
}

/// Serves the routes on `listener` until `shutdown` is cancelled.
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
    if !node.is_connected() {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "not connected to the coordinator\n",
        )
    } else if !node.executor_ready() {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "the executor is not ready (chromedriver down)\n",
        )
    } else {
        (StatusCode::OK, "ready\n")
    }
}

/// OpenMetrics when the scraper asks for it, else the Prometheus text format 0.0.4.
async fn metrics(
    State(node): State<NodeHandle>,
    headers: axum::http::HeaderMap,
) -> impl IntoResponse {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let format = lps_telemetry::exposition::Format::negotiate(accept);
    (
        [(header::CONTENT_TYPE, format.content_type())],
        node.metrics().encode_as(format),
    )
}
