//! A call whose deadline (`grpc-timeout`) passes on the server ends `DEADLINE_EXCEEDED`.
//!
//! tonic enforces `grpc-timeout` itself, but answers `CANCELLED: Timeout expired` — the code
//! a client uses for its own timeout — which breaks retry policies that retry
//! `DEADLINE_EXCEEDED` and not `CANCELLED`. This layer, inside tonic's, ends the call a little
//! before tonic would, with the code the gRPC spec gives a server for it. The handler's future
//! is dropped there: whatever it committed stays (a Search may have been stored; a retry with
//! its idempotency key returns it).

use std::{
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

use axum::http::{HeaderMap, Request, Response};
use tonic::Status;

/// How much earlier than the deadline this layer ends a call: a tenth of the call's time,
/// within these bounds, so the answer reaches the client before tonic's timer on either
/// side fires (a tonic client enforces the same `grpc-timeout` itself and reports its own
/// expiry as CANCELLED), also on a loaded machine.
const MIN_MARGIN: Duration = Duration::from_millis(5);
const MAX_MARGIN: Duration = Duration::from_millis(100);

fn margin(timeout: Duration) -> Duration {
    (timeout / 10).clamp(MIN_MARGIN, MAX_MARGIN)
}

/// The layer for `Server::builder().layer(..)`.
#[derive(Debug, Clone, Copy, Default)]
pub struct DeadlineLayer;

impl<S> tower::Layer<S> for DeadlineLayer {
    type Service = Deadline<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Deadline { inner }
    }
}

#[derive(Debug, Clone)]
pub struct Deadline<S> {
    inner: S,
}

impl<S, ReqBody, ResBody> tower::Service<Request<ReqBody>> for Deadline<S>
where
    S: tower::Service<Request<ReqBody>, Response = Response<ResBody>>,
    S::Future: Send + 'static,
    ResBody: Default + Send + 'static,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let timeout = grpc_timeout(request.headers());
        let call = self.inner.call(request);
        Box::pin(async move {
            let Some(timeout) = timeout else {
                return call.await;
            };
            match tokio::time::timeout(timeout.saturating_sub(margin(timeout)), call).await {
                Ok(response) => response,
                Err(_) => Ok(
                    Status::deadline_exceeded("the call's deadline passed on the server")
                        .into_http(),
                ),
            }
        })
    }
}

/// The `grpc-timeout` header: up to 8 digits and a unit (`H`, `M`, `S`, `m`, `u`, `n`).
/// `None` when absent or malformed (tonic then refuses or ignores it as it does).
fn grpc_timeout(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get("grpc-timeout")?.to_str().ok()?;
    let (digits, unit) = value.split_at(value.len().checked_sub(1)?);
    if digits.is_empty() || digits.len() > 8 {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n * 3600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_margin_is_a_tenth_within_bounds() {
        assert_eq!(margin(Duration::from_millis(20)), MIN_MARGIN);
        assert_eq!(
            margin(Duration::from_millis(300)),
            Duration::from_millis(30)
        );
        assert_eq!(margin(Duration::from_secs(60)), MAX_MARGIN);
    }

    #[test]
    fn grpc_timeouts_are_read_in_every_unit() {
        let of = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert("grpc-timeout", v.parse().unwrap());
            grpc_timeout(&h)
        };
        assert_eq!(of("2H"), Some(Duration::from_secs(7200)));
        assert_eq!(of("3M"), Some(Duration::from_secs(180)));
        assert_eq!(of("5S"), Some(Duration::from_secs(5)));
        assert_eq!(of("300m"), Some(Duration::from_millis(300)));
        assert_eq!(of("250u"), Some(Duration::from_micros(250)));
        assert_eq!(of("99n"), Some(Duration::from_nanos(99)));
        for bad in ["", "m", "123456789m", "5x", "-5S", "5.0S"] {
            assert_eq!(of(bad), None, "{bad:?}");
        }
        assert_eq!(grpc_timeout(&HeaderMap::new()), None);
    }
}
