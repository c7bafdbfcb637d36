//! gRPC server request metrics: `lps_grpc_requests_total{method,code}` and
//! `lps_grpc_request_duration_seconds{method}`, recorded by a tower layer on the server.
//!
//! `method` is the request path (`/lps.v1.SearchService/Search`) for the services this
//! server has (`lps.v1.*`, `grpc.*`); any other path, and any call answered UNIMPLEMENTED,
//! is `other`, so a client cannot make labels up. `code` is the `grpc-status` of the response head: tonic answers an error a
//! handler returns as trailers-only, with the status in the head; a response without one
//! is counted `OK`. NB: a streaming call that fails after its first message ends with the
//! status in the trailers and counts as `OK`, and the duration of a streaming call is the
//! time to its response head, not the stream's life (`lps_node_streams` has those).

use std::{
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use axum::http::{Request, Response};

use crate::metrics::{GrpcLabels, MethodLabels, Metrics};

/// The layer for `Server::builder().layer(..)`.
#[derive(Debug, Clone)]
pub struct ObserveLayer {
    pub metrics: Arc<Metrics>,
}

impl<S> tower::Layer<S> for ObserveLayer {
    type Service = Observe<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Observe {
            inner,
            metrics: self.metrics.clone(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Observe<S> {
    inner: S,
    metrics: Arc<Metrics>,
}

impl<S, ReqBody, ResBody> tower::Service<Request<ReqBody>> for Observe<S>
where
    S: tower::Service<Request<ReqBody>, Response = Response<ResBody>>,
    S::Future: Send + 'static,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let method = method_label(request.uri().path());
        let metrics = self.metrics.clone();
        let started = std::time::Instant::now();
        let call = self.inner.call(request);
        Box::pin(async move {
            let response = call.await;
            let code = match &response {
                Ok(r) => r
                    .headers()
                    .get("grpc-status")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.parse::<i32>().ok())
                    .map_or("OK", code_name),
                Err(_) => "UNKNOWN",
            };
            // NB: any path under a known package is routed; an unknown method there is
            // UNIMPLEMENTED and must not become a label of its own.
            let method = if code == "UNIMPLEMENTED" {
                "other".to_owned()
            } else {
                method
            };
            metrics
                .grpc_request_duration
                .get_or_create(&MethodLabels {
                    method: method.clone(),
                })
                .observe(started.elapsed().as_secs_f64());
            metrics
                .grpc_requests
                .get_or_create(&GrpcLabels {
                    method,
                    code: code.to_owned(),
                })
                .inc();
            response
        })
    }
}

/// The path for this server's services, else `other`.
fn method_label(path: &str) -> String {
    let known = ["/lps.v1.", "/grpc.health.v1.", "/grpc.reflection."];
    let well_formed = path.len() <= 128
        && path[1.min(path.len())..]
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._/".contains(&b));
    if well_formed && known.iter().any(|k| path.starts_with(k)) {
        path.to_owned()
    } else {
        "other".to_owned()
    }
}

/// The gRPC status code's name (the `code` label).
pub fn code_name(code: i32) -> &'static str {
    match code {
        0 => "OK",
        1 => "CANCELLED",
        2 => "UNKNOWN",
        3 => "INVALID_ARGUMENT",
        4 => "DEADLINE_EXCEEDED",
        5 => "NOT_FOUND",
        6 => "ALREADY_EXISTS",
        7 => "PERMISSION_DENIED",
        8 => "RESOURCE_EXHAUSTED",
        9 => "FAILED_PRECONDITION",
        10 => "ABORTED",
        11 => "OUT_OF_RANGE",
        12 => "UNIMPLEMENTED",
        13 => "INTERNAL",
        14 => "UNAVAILABLE",
        15 => "DATA_LOSS",
        16 => "UNAUTHENTICATED",
        _ => "UNKNOWN",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_this_servers_paths_are_labels() {
        assert_eq!(
            method_label("/lps.v1.SearchService/Search"),
            "/lps.v1.SearchService/Search"
        );
        assert_eq!(
            method_label("/grpc.health.v1.Health/Check"),
            "/grpc.health.v1.Health/Check"
        );
        assert_eq!(method_label("/evil.Service/Anything"), "other");
        assert_eq!(method_label("/lps.v1.X/\"{}"), "other");
        assert_eq!(method_label(""), "other");
    }
}
