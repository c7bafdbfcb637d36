//! Refuse before decoding: a tower layer in front of every gRPC service that checks the
//! bearer token of a call from its headers, before one byte of its body is read, and then
//! holds the body of a unary call to its method's budget
//! ([`lps_proto::model::budget`]): at most so many bytes, read with that limit, and at
//! most so many elements in each repeated field, counted on the wire before tonic decodes
//! the message. An unauthenticated caller therefore costs the coordinator its headers and
//! what HTTP/2 flow control lets it send before the refusal (the body is dropped unread);
//! an authenticated one at most its method's budget.
//!
//! - A missing or unknown token is UNAUTHENTICATED (reasons MISSING_TOKEN, UNKNOWN_TOKEN),
//!   the same status the handlers gave before, now without reading the body. The token's
//!   role is the service's: client (or admin) for SearchService, ScheduleService and
//!   OpsService — whose handlers still ask for an admin token on writes — and node for
//!   NodeService. Health and reflection need no token.
//! - A body over its method's bytes is RESOURCE_EXHAUSTED (reason REQUEST_TOO_LARGE,
//!   naming the method and the limit); a repeated field over its elements is
//!   INVALID_ARGUMENT naming the field (`products: at most 200 elements, got 1900000`).
//! - A stream's frames (NodeService.Connect, one `NodeMessage` each) are held to
//!   [`NODE_FRAME_MAX_BYTES`] by tonic's `max_decoding_message_size`, which refuses a frame
//!   from its length prefix before buffering it; the services are built with
//!   [`max_decoding_bytes`] for that.
//!
//! NB: a compressed message (the flag of its length prefix) is passed on unscanned: this
//! server accepts no compression, so tonic refuses it without decoding it.

use std::{
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use axum::{
    body::Bytes,
    http::{Request, Response},
};
use futures::StreamExt as _;
use lps_proto::model::{
    FieldError,
    budget::{
        ElementLimit, NODE_FRAME_MAX_BYTES, SCHEDULE_REQUEST_ELEMENTS, SCHEDULE_REQUEST_MAX_BYTES,
        SEARCH_REQUEST_ELEMENTS, SEARCH_REQUEST_MAX_BYTES, SMALL_REQUEST_MAX_BYTES,
    },
};
use tonic::{Code, Status, body::Body, metadata::MetadataMap};

use crate::{
    auth::{Role, Tokens},
    error::{invalid, refused},
};

/// What a method may bring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// The token a call needs; `None`: none (health, reflection).
    pub role: Option<Role>,
    /// The most bytes of the body of a unary call, its length prefix excluded; `None`: a
    /// streaming call, whose frames tonic holds to the service's decoding limit.
    pub max_bytes: Option<usize>,
    pub elements: &'static [ElementLimit],
}

/// The budget of the call to `path` (`/lps.v1.SearchService/Search`); `None` for a path no
/// service here has (tonic answers UNIMPLEMENTED without reading it).
pub fn budget(path: &str) -> Option<Budget> {
    let (service, method) = path.strip_prefix('/')?.split_once('/')?;
    let small = |role| Budget {
        role,
        max_bytes: Some(SMALL_REQUEST_MAX_BYTES),
        elements: &[],
    };
    Some(match (service, method) {
        ("lps.v1.SearchService", "Search") => Budget {
            role: Some(Role::Client),
            max_bytes: Some(SEARCH_REQUEST_MAX_BYTES),
            elements: SEARCH_REQUEST_ELEMENTS,
        },
        ("lps.v1.ScheduleService", "CreateSchedule") => Budget {
            role: Some(Role::Client),
            max_bytes: Some(SCHEDULE_REQUEST_MAX_BYTES),
            elements: SCHEDULE_REQUEST_ELEMENTS,
        },
        ("lps.v1.SearchService" | "lps.v1.ScheduleService" | "lps.v1.OpsService", _) => {
            small(Some(Role::Client))
        }
        ("lps.v1.NodeService", _) => Budget {
            role: Some(Role::Node),
            max_bytes: None,
            elements: &[],
        },
        // NB: health's Watch and reflection's ServerReflectionInfo stream; their frames are
        // held to the services' decoding limit.
        ("grpc.health.v1.Health", "Check") => small(None),
        ("grpc.health.v1.Health", _)
        | ("grpc.reflection.v1.ServerReflection" | "grpc.reflection.v1alpha.ServerReflection", _) => {
            Budget {
                role: None,
                max_bytes: None,
                elements: &[],
            }
        }
        _ => return None,
    })
}

/// The `max_decoding_message_size` of the service named `service`: its largest method's
/// budget (the layer holds each unary method to its own).
pub fn max_decoding_bytes(service: &str) -> usize {
    match service {
        "lps.v1.SearchService" => SEARCH_REQUEST_MAX_BYTES,
        "lps.v1.ScheduleService" => SCHEDULE_REQUEST_MAX_BYTES,
        "lps.v1.NodeService" => NODE_FRAME_MAX_BYTES,
        _ => SMALL_REQUEST_MAX_BYTES,
    }
}

/// The layer for `Server::builder().layer(..)`.
#[derive(Debug, Clone)]
pub struct AdmissionLayer {
    pub tokens: Arc<Tokens>,
}

impl<S> tower::Layer<S> for AdmissionLayer {
    type Service = Admission<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Admission {
            inner,
            tokens: self.tokens.clone(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Admission<S> {
    inner: S,
    tokens: Arc<Tokens>,
}

impl<S, ResBody> tower::Service<Request<Body>> for Admission<S>
where
    S: tower::Service<Request<Body>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    ResBody: Default + Send + 'static,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let path = request.uri().path().to_owned();
        let Some(budget) = budget(&path) else {
            return Box::pin(self.inner.call(request));
        };
        if let Some(role) = budget.role {
            // NB: headers only; the body is dropped unread with the request.
            let metadata = MetadataMap::from_headers(request.headers().clone());
            if let Err(status) = self.tokens.check(&metadata, role) {
                return Box::pin(async move { Ok(status.into_http()) });
            }
        }
        let Some(max_bytes) = budget.max_bytes else {
            return Box::pin(self.inner.call(request));
        };
        // The service was ready for this call; the clone that runs it after the body is
        // read takes its place (tower's "clone, then swap" for a service called later).
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            let bytes = match read_within(body, &path, max_bytes, budget.elements).await {
                Ok(bytes) => bytes,
                Err(status) => return Ok(status.into_http()),
            };
            inner
                .call(Request::from_parts(
                    parts,
                    Body::new(axum::body::Body::from(bytes)),
                ))
                .await
        })
    }
}

/// Room for the gRPC length prefixes (5 bytes a message) of a unary body.
const PREFIX_BYTES: usize = 5;

/// The body of a unary call, read with its budget's limit and its elements counted.
async fn read_within(
    body: Body,
    path: &str,
    max_bytes: usize,
    elements: &[ElementLimit],
) -> Result<Bytes, Status> {
    let method = path.trim_start_matches('/');
    let too_large = || {
        refused(
            Code::ResourceExhausted,
            "REQUEST_TOO_LARGE",
            format!("{method}: the request is larger than its limit of {max_bytes} bytes"),
        )
    };
    let limit = max_bytes + PREFIX_BYTES;
    let mut chunks = axum::body::Body::new(body).into_data_stream();
    let mut bytes = Vec::new();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(|_| {
            Status::cancelled(format!("{method}: the request body was not received"))
        })?;
        // NB: checked before the chunk is kept: a body never costs more than its limit.
        if bytes.len() + chunk.len() > limit {
            return Err(too_large());
        }
        bytes.extend_from_slice(&chunk);
    }
    let bytes = Bytes::from(bytes);
    if let Some((compressed, message)) = frame(&bytes)
        && !compressed
    {
        if message.len() > max_bytes {
            return Err(too_large());
        }
        check_elements(message, elements).map_err(invalid)?;
    }
    Ok(bytes)
}

/// The first message of a gRPC body: whether it is compressed, and its bytes (`None`: not
/// one whole message; tonic answers that).
fn frame(body: &[u8]) -> Option<(bool, &[u8])> {
    let (&flag, rest) = body.split_first()?;
    let len = u32::from_be_bytes(rest.get(..4)?.try_into().ok()?) as usize;
    Some((flag == 1, rest.get(4..4 + len)?))
}

/// Counts the top-level occurrences of `elements`' fields in `message` (protobuf wire
/// format, without decoding it) and refuses the first over its limit. A message that does
/// not parse is let through: tonic's decoding refuses it within the byte budget.
fn check_elements(message: &[u8], elements: &[ElementLimit]) -> Result<(), FieldError> {
    if elements.is_empty() {
        return Ok(());
    }
    let mut counts = vec![0usize; elements.len()];
    let mut at = message;
    while !at.is_empty() {
        let Some(key) = varint(&mut at) else {
            return Ok(());
        };
        let field = key >> 3;
        let skipped = match key & 7 {
            0 => varint(&mut at).map(|_| ()),
            1 => skip(&mut at, 8),
            2 => varint(&mut at).and_then(|len| skip(&mut at, usize::try_from(len).ok()?)),
            5 => skip(&mut at, 4),
            _ => None,
        };
        if skipped.is_none() {
            return Ok(());
        }
        if let Some(i) = elements.iter().position(|e| u64::from(e.field) == field) {
            counts[i] += 1;
        }
    }
    match elements.iter().zip(&counts).find(|(e, n)| **n > e.max) {
        Some((e, n)) => Err(FieldError::new(
            e.name,
            format!("at most {} elements, got {n}", e.max),
        )),
        None => Ok(()),
    }
}

fn varint(at: &mut &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let (&b, rest) = at.split_first()?;
        *at = rest;
        value |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

fn skip(at: &mut &[u8], n: usize) -> Option<()> {
    *at = at.get(n..)?;
    Some(())
}

#[cfg(test)]
mod tests {
    use lps_proto::pb;
    use prost::Message as _;

    use super::*;

    fn framed(message: &[u8]) -> Vec<u8> {
        let mut out = vec![0];
        out.extend_from_slice(&u32::try_from(message.len()).unwrap().to_be_bytes());
        out.extend_from_slice(message);
        out
    }

    #[test]
    fn elements_are_counted_on_the_wire() {
        let req = pb::SearchRequest {
            products: vec![pb::Product::default(); 201],
            malls: vec!["m".into(); 3],
            max_age: Some(prost_types::Duration {
                seconds: 5,
                nanos: 0,
            }),
            ..Default::default()
        };
        let body = framed(&req.encode_to_vec());
        let (compressed, message) = frame(&body).unwrap();
        assert!(!compressed);
        let e = check_elements(message, SEARCH_REQUEST_ELEMENTS).unwrap_err();
        assert_eq!(e.field, "products");
        assert!(e.reason.contains("at most 200 elements, got 201"), "{e}");
        let ok = pb::SearchRequest {
            products: vec![pb::Product::default(); 200],
            ..req
        };
        assert!(check_elements(&ok.encode_to_vec(), SEARCH_REQUEST_ELEMENTS).is_ok());
        // Not protobuf: left to tonic.
        assert!(check_elements(&[0xff; 12], SEARCH_REQUEST_ELEMENTS).is_ok());
    }

    #[test]
    fn every_service_has_a_budget() {
        let search = budget("/lps.v1.SearchService/Search").unwrap();
        assert_eq!(search.role, Some(Role::Client));
        assert_eq!(search.max_bytes, Some(SEARCH_REQUEST_MAX_BYTES));
        assert_eq!(
            budget("/lps.v1.NodeService/Connect").unwrap().role,
            Some(Role::Node)
        );
        assert_eq!(
            budget("/lps.v1.OpsService/DrainNode").unwrap().max_bytes,
            Some(SMALL_REQUEST_MAX_BYTES)
        );
        assert_eq!(budget("/grpc.health.v1.Health/Check").unwrap().role, None);
        assert_eq!(budget("/nope.Service/X"), None);
        assert_eq!(budget("garbage"), None);
    }
}
