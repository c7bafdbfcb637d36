//! Gamma's own routes (documented in [`super`]): the search page behind its gate, the
//! JSON API and the ad click redirect. The counting middleware and the common routes are
//! [`crate::mall::routes`]'s.

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;

use crate::catalog::{ListingKind, MallStyle};
use crate::mall::gamma::page::{self, ResultsView};
use crate::mall::gamma::{
    AD_REDIRECT_PATH, API_DISPLAY, API_KEY_HEADER, API_MAX_START, API_PATH, Item, MORE_PATH,
    PAGE_SIZE, page_count, results,
};
use crate::mall::markup::GAMMA_MARKUP;
use crate::mall::routes::{cookie_value, exit_label, no_store, not_found, slow_delay};
use crate::mall::state::{Gate, Verdict};
use crate::mall::{Shared, pages, wall};

pub(crate) fn routes() -> Router<Arc<Shared>> {
    Router::new()
        .route("/search", get(search_page))
        .route(API_PATH, get(search_api))
        .route(AD_REDIRECT_PATH, get(ad_redirect))
        .route(MORE_PATH, get(more_refused))
}

/// `http://host:port` for absolute links: the bound address, or — when the mall listens
/// on an unspecified address (`0.0.0.0`) — the request's `Host` if it is a plain
/// host[:port].
fn base_url(shared: &Shared, headers: &HeaderMap) -> String {
    if !shared.addr.ip().is_unspecified() {
        return format!("http://{}", shared.addr);
    }
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .filter(|h| {
            !h.is_empty()
                && h.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | ':' | '-' | '[' | ']'))
        });
    match host {
        Some(host) => format!("http://{host}"),
        None => format!("http://{}", shared.addr),
    }
}

#[derive(Debug, Deserialize)]
struct PageParams {
    #[serde(default)]
    q: String,
    page: Option<usize>,
    slow_ms: Option<u64>,
}

async fn search_page(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    Query(params): Query<PageParams>,
) -> Response {
    let exit = exit_label(&headers);
    if shared.counters.search_page(&exit) == Verdict::Block {
        tracing::info!(mall.style = %shared.style, exit = %exit, "search blocked");
        return no_store(Html(pages::block_page(MallStyle::Gamma)));
    }
    if let Some(walled) = wall::gate(&shared, &exit, &headers) {
        return walled;
    }
    let (page_delay, _) = shared.counters.slow();
    tokio::time::sleep(slow_delay(page_delay, params.slow_ms)).await;
    let clearance = cookie_value(&headers, GAMMA_MARKUP.clearance_cookie);
    match shared.counters.gamma_gate(clearance.as_deref()) {
        Gate::Restricted => {
            tracing::info!(exit = %exit, "search restricted");
            let mut response = no_store(Html(page::restricted_page()));
            *response.status_mut() = StatusCode::IM_A_TEAPOT;
            response
        }
        Gate::Challenge { token, after } => {
            tracing::info!(exit = %exit, "search challenged");
            no_store(Html(page::challenge_page(&token, after)))
        }
        Gate::Results { redesigned } => {
            let base = base_url(&shared, &headers);
            let all = results(&shared.catalog, &params.q);
            let page = params.page.unwrap_or(1).max(1);
            if let Some(status) = shared.counters.take_page_failure(page) {
                tracing::info!(exit = %exit, page, status, "result page failed");
                let mut response = no_store(Html(page::error_page(&params.q)));
                *response.status_mut() =
                    StatusCode::from_u16(status).unwrap_or(StatusCode::TOO_MANY_REQUESTS);
                return response;
            }
            let view = ResultsView {
                query: &params.q,
                page,
                pages: page_count(all.len()),
                total: all.len(),
                items: all
                    .iter()
                    .skip((page - 1).saturating_mul(PAGE_SIZE))
                    .take(PAGE_SIZE)
                    .map(|l| priced(&shared, Item::new(l, &base, &params.q)))
                    .collect(),
                scroll_fails: !redesigned && shared.counters.take_scroll_failure(),
            };
            let html = if redesigned {
                page::redesigned_page(&view)
            } else {
                page::results_page(&view)
            };
            no_store(Html(html))
        }
    }
}

/// A failing page's request for its next batch: refused, as a throttling mall does.
async fn more_refused() -> Response {
    api_error(
        StatusCode::TOO_MANY_REQUESTS,
        "too_many_requests",
        "요청이 많아 잠시 후 다시 시도해 주세요",
    )
}

#[derive(Debug, Deserialize)]
struct ApiParams {
    query: Option<String>,
    start: Option<usize>,
    display: Option<usize>,
    slow_ms: Option<u64>,
}

fn api_error(status: StatusCode, code: &str, message: &str) -> Response {
    let body = serde_json::json!({ "errorCode": code, "errorMessage": message });
    let mut response = no_store(Json(body));
    *response.status_mut() = status;
    response
}

async fn search_api(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    params: Result<Query<ApiParams>, QueryRejection>,
) -> Response {
    let key = headers.get(API_KEY_HEADER).and_then(|v| v.to_str().ok());
    if key != Some(shared.api_key.as_str()) {
        shared.counters.api_unauthorized();
        return api_error(
            StatusCode::UNAUTHORIZED,
            "AUTH_FAILED",
            "X-Gamma-Key 헤더가 없거나 올바르지 않습니다",
        );
    }
    let Ok(Query(params)) = params else {
        return api_error(
            StatusCode::BAD_REQUEST,
            "BAD_PARAM",
            "start와 display는 숫자여야 합니다",
        );
    };
    let query = params.query.as_deref().map(str::trim).unwrap_or_default();
    let start = params.start.unwrap_or(1);
    let display = params.display.unwrap_or(API_DISPLAY.0);
    if query.is_empty() {
        return api_error(StatusCode::BAD_REQUEST, "BAD_PARAM", "query가 필요합니다");
    }
    if !(1..=API_MAX_START).contains(&start) || !(1..=API_DISPLAY.1).contains(&display) {
        return api_error(
            StatusCode::BAD_REQUEST,
            "BAD_PARAM",
            "start는 1..=1000, display는 1..=100입니다",
        );
    }
    let exit = exit_label(&headers);
    if shared.counters.search_page(&exit) == Verdict::Block {
        return api_error(
            StatusCode::TOO_MANY_REQUESTS,
            "RATE_LIMITED",
            "요청이 너무 많습니다",
        );
    }
    let (_, api_delay) = shared.counters.slow();
    tokio::time::sleep(slow_delay(api_delay, params.slow_ms)).await;
    let base = base_url(&shared, &headers);
    let organic: Vec<_> = results(&shared.catalog, query)
        .into_iter()
        .filter(|l| l.kind != ListingKind::Ad)
        .collect();
    let items: Vec<Item<'_>> = organic
        .iter()
        .skip(start - 1)
        .take(display)
        .map(|l| priced(&shared, Item::new(l, &base, query)))
        .collect();
    no_store(Json(serde_json::json!({
        "total": organic.len(),
        "start": start,
        "display": items.len(),
        "items": items,
    })))
}

#[derive(Debug, Deserialize)]
struct AdParams {
    #[serde(default)]
    u: String,
}

async fn ad_redirect(
    State(shared): State<Arc<Shared>>,
    Query(params): Query<AdParams>,
) -> Response {
    let target = shared
        .catalog
        .listing_by_path(MallStyle::Gamma, &params.u)
        .and_then(|l| HeaderValue::from_str(&l.path).ok());
    match target {
        Some(location) => {
            shared.counters.ad_click();
            let mut response = StatusCode::FOUND.into_response();
            response.headers_mut().insert(header::LOCATION, location);
            response
        }
        None => not_found(MallStyle::Gamma),
    }
}

/// `item` at the price set at run time for its listing (`/_control/price`), if any.
fn priced<'a>(shared: &Shared, mut item: Item<'a>) -> Item<'a> {
    item.price = shared.counters.price(item.id, item.price);
    item
}
