//! The mall's HTTP routes (see the table in the module doc of [`crate::mall`]) and the
//! counting middleware.
//!
//! Handlers are cancellation-safe: a client that disconnects during a slow response drops
//! the handler future, and counters were already updated before the delay.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::body::HttpBody;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::catalog::{Listing, MallStyle};
use crate::mall::state::{RequestKind, Verdict};
use crate::mall::{Shared, assets, control, gamma, markup, pages, wall};
use crate::{DIRECT_EXIT, EXIT_IP_HEADER};

/// Upper bound of a per-request `slow_ms`.
const MAX_SLOW: Duration = Duration::from_secs(600);

pub(crate) fn router(shared: Arc<Shared>) -> Router {
    let own = match shared.style {
        MallStyle::Alpha | MallStyle::Beta => Router::new()
            .route("/search", get(search_page))
            .route("/api/search", get(search_api)),
        MallStyle::Gamma => gamma::routes(),
    };
    Router::new()
        .route("/", get(home))
        .merge(own)
        .route("/img/{file}", get(image))
        .route(pages::FONT_PATH, get(font))
        .merge(wall::routes())
        .merge(control::routes())
        .fallback(detail_or_not_found)
        .layer(middleware::from_fn_with_state(
            Arc::clone(&shared),
            count_request,
        ))
        .with_state(shared)
}

/// The exit IP label of a request.
pub(crate) fn exit_label(headers: &HeaderMap) -> String {
    headers
        .get(EXIT_IP_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .unwrap_or(DIRECT_EXIT)
        .to_owned()
}

/// The value of the cookie `name`, if the request carries one.
pub(crate) fn cookie_value(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, value)| value.to_owned())
}

fn request_kind(path: &str) -> RequestKind {
    match path {
        "/search" => RequestKind::SearchPage,
        "/api/search" | gamma::API_PATH => RequestKind::SearchApi,
        pages::FONT_PATH => RequestKind::Font,
        p if p.starts_with("/img/") => RequestKind::Image,
        _ => RequestKind::Other,
    }
}

async fn count_request(State(shared): State<Arc<Shared>>, req: Request, next: Next) -> Response {
    let path = req.uri().path().to_owned();
    if path.starts_with("/_control/") {
        return next.run(req).await;
    }
    let exit = exit_label(req.headers());
    let response = next.run(req).await;
    let body_bytes = response.body().size_hint().exact().unwrap_or(0);
    shared
        .counters
        .record(&exit, request_kind(&path), body_bytes);
    response
}

#[derive(Debug, Deserialize)]
struct SearchParams {
    #[serde(default)]
    q: String,
    slow_ms: Option<u64>,
}

/// The delay of a served search response: the configured one or the request's own
/// `slow_ms`, whichever is longer, at most [`MAX_SLOW`].
pub(crate) fn slow_delay(configured: Duration, slow_ms: Option<u64>) -> Duration {
    let asked = Duration::from_millis(slow_ms.unwrap_or(0));
    configured.max(asked).min(MAX_SLOW)
}

async fn home(State(shared): State<Arc<Shared>>) -> Html<String> {
    Html(pages::home_page(shared.style))
}

async fn search_page(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    Query(params): Query<SearchParams>,
) -> Response {
    let exit = exit_label(&headers);
    match shared.counters.search_page(&exit) {
        Verdict::Block => {
            tracing::info!(mall.style = %shared.style, exit = %exit, "search blocked");
            no_store(Html(pages::block_page(shared.style)))
        }
        Verdict::Serve => {
            if let Some(walled) = wall::gate(&shared, &exit, &headers) {
                return walled;
            }
            let (page_delay, _) = shared.counters.slow();
            tokio::time::sleep(slow_delay(page_delay, params.slow_ms)).await;
            no_store(Html(pages::search_shell(shared.style, &params.q)))
        }
    }
}

/// One card in the JSON API.
#[derive(Debug, Serialize)]
struct ApiItem<'a> {
    id: &'a str,
    title: &'a str,
    price: u64,
    shipping: u64,
    seller: &'a str,
    url: &'a str,
    image: String,
}

impl<'a> From<&'a Listing> for ApiItem<'a> {
    fn from(l: &'a Listing) -> Self {
        ApiItem {
            id: &l.id,
            title: &l.title,
            price: l.price,
            shipping: l.shipping,
            seller: &l.seller,
            url: &l.path,
            image: l.image_path(),
        }
    }
}

#[derive(Debug, Serialize)]
struct ApiAnswer<'a> {
    query: &'a str,
    blocked: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    block_html: Option<String>,
    total: usize,
    items: Vec<ApiItem<'a>>,
}

async fn search_api(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    Query(params): Query<SearchParams>,
) -> Response {
    let exit = exit_label(&headers);
    if shared.counters.search_api(&exit) == Verdict::Block {
        return no_store(Json(blocked_answer(shared.style, &params.q)));
    }
    let (_, api_delay) = shared.counters.slow();
    tokio::time::sleep(slow_delay(api_delay, params.slow_ms)).await;
    let items: Vec<ApiItem<'_>> = shared
        .catalog
        .search(shared.style, &params.q)
        .into_iter()
        .map(|hit| ApiItem {
            price: shared.counters.price(&hit.listing.id, hit.listing.price),
            ..ApiItem::from(hit.listing)
        })
        .collect();
    no_store(Json(ApiAnswer {
        query: &params.q,
        blocked: false,
        block_html: None,
        total: items.len(),
        items,
    }))
}

fn blocked_answer(style: MallStyle, query: &str) -> ApiAnswer<'_> {
    ApiAnswer {
        query,
        blocked: true,
        block_html: Some(markup::block_marker_html(style)),
        total: 0,
        items: Vec::new(),
    }
}

async fn image(State(shared): State<Arc<Shared>>, Path(file): Path<String>) -> Response {
    let known = file
        .strip_suffix(".jpg")
        .and_then(|id| shared.catalog.listing_by_id(shared.style, id))
        .is_some();
    if !known {
        return not_found(shared.style);
    }
    asset("image/jpeg", assets::image())
}

async fn font() -> Response {
    asset("font/woff2", assets::font())
}

fn asset(content_type: &'static str, body: Bytes) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

async fn detail_or_not_found(State(shared): State<Arc<Shared>>, uri: Uri) -> Response {
    match shared.catalog.listing_by_path(shared.style, uri.path()) {
        Some(listing) => {
            let listing = Listing {
                price: shared.counters.price(&listing.id, listing.price),
                ..listing.clone()
            };
            Html(pages::detail_page(shared.style, &listing)).into_response()
        }
        None => not_found(shared.style),
    }
}

pub(crate) fn not_found(style: MallStyle) -> Response {
    (StatusCode::NOT_FOUND, Html(pages::not_found_page(style))).into_response()
}

pub(crate) fn no_store(body: impl IntoResponse) -> Response {
    let mut response = body.into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}
