//! The mall's `/_control/*` endpoints (documented in [`crate::mall`]): thin adapters over
//! the counters, each answering with the current [`MallStats`] as JSON (except
//! `/_control/wall`, which answers with the [`WallReports`], and `/_control/price`, which
//! answers with the listing's new price).

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;

use crate::catalog::MallStyle;
use crate::mall::gamma::{CHALLENGE_CLEARS_AFTER, MAX_CHALLENGE_DELAY};
use crate::mall::wall::WallReports;
use crate::mall::{MallStats, Shared};

pub(crate) fn routes() -> Router<Arc<Shared>> {
    Router::new()
        .route("/_control/stats", get(stats))
        .route("/_control/reset", post(reset))
        .route("/_control/block", post(block))
        .route("/_control/unblock", post(unblock))
        .route("/_control/slow", post(slow))
        .route("/_control/block-after", post(block_after))
        .route("/_control/challenge", post(challenge))
        .route("/_control/restrict", post(restrict))
        .route("/_control/layout", post(layout))
        .route("/_control/bot-wall", post(bot_wall))
        .route("/_control/wall", get(wall_reports))
        .route("/_control/price", post(price))
}

fn answer(shared: &Shared) -> Json<MallStats> {
    Json(shared.counters.snapshot())
}

async fn stats(State(shared): State<Arc<Shared>>) -> Json<MallStats> {
    answer(&shared)
}

async fn reset(State(shared): State<Arc<Shared>>) -> Json<MallStats> {
    shared.counters.reset();
    answer(&shared)
}

#[derive(Debug, Deserialize)]
struct ExitParam {
    exit: String,
}

async fn block(State(shared): State<Arc<Shared>>, Query(p): Query<ExitParam>) -> Json<MallStats> {
    shared.counters.block_exit(p.exit.trim());
    answer(&shared)
}

async fn unblock(State(shared): State<Arc<Shared>>, Query(p): Query<ExitParam>) -> Json<MallStats> {
    shared.counters.unblock_exit(p.exit.trim());
    answer(&shared)
}

#[derive(Debug, Deserialize)]
struct SlowParams {
    ms: Option<u64>,
    page_ms: Option<u64>,
    api_ms: Option<u64>,
}

async fn slow(State(shared): State<Arc<Shared>>, Query(p): Query<SlowParams>) -> Response {
    let page = p.page_ms.or(p.ms).map(Duration::from_millis);
    let api = p.api_ms.or(p.ms).map(Duration::from_millis);
    if page.is_none() && api.is_none() {
        let error = serde_json::json!({ "error": "give ms, page_ms or api_ms" });
        return (StatusCode::BAD_REQUEST, Json(error)).into_response();
    }
    shared.counters.set_slow(page, api);
    answer(&shared).into_response()
}

#[derive(Debug, Deserialize)]
struct BlockAfterParams {
    n: Option<u32>,
}

async fn block_after(
    State(shared): State<Arc<Shared>>,
    Query(p): Query<BlockAfterParams>,
) -> Json<MallStats> {
    shared.counters.set_block_after(p.n);
    answer(&shared)
}

fn bad_request(message: String) -> Response {
    let error = serde_json::json!({ "error": message });
    (StatusCode::BAD_REQUEST, Json(error)).into_response()
}

/// `None` for gamma; the 400 answer for the others.
fn gamma_only(shared: &Shared, control: &str) -> Option<Response> {
    (shared.style != MallStyle::Gamma).then(|| {
        bad_request(format!(
            "/_control/{control} is a gamma control; this mall is {}",
            shared.style
        ))
    })
}

#[derive(Debug, Deserialize)]
struct ChallengeParams {
    pages: Option<u32>,
    after_ms: Option<u64>,
}

async fn challenge(
    State(shared): State<Arc<Shared>>,
    Query(p): Query<ChallengeParams>,
) -> Response {
    if let Some(refused) = gamma_only(&shared, "challenge") {
        return refused;
    }
    let after = p
        .after_ms
        .map_or(CHALLENGE_CLEARS_AFTER, Duration::from_millis);
    if after > MAX_CHALLENGE_DELAY {
        return bad_request(format!(
            "after_ms is at most {}",
            MAX_CHALLENGE_DELAY.as_millis()
        ));
    }
    shared.counters.set_challenge(p.pages.unwrap_or(1), after);
    answer(&shared).into_response()
}

#[derive(Debug, Deserialize)]
struct RestrictParams {
    on: Option<bool>,
}

async fn restrict(State(shared): State<Arc<Shared>>, Query(p): Query<RestrictParams>) -> Response {
    if let Some(refused) = gamma_only(&shared, "restrict") {
        return refused;
    }
    shared.counters.set_restricted(p.on.unwrap_or(true));
    answer(&shared).into_response()
}

#[derive(Debug, Deserialize)]
struct LayoutParams {
    changed: Option<bool>,
}

async fn layout(State(shared): State<Arc<Shared>>, Query(p): Query<LayoutParams>) -> Response {
    if let Some(refused) = gamma_only(&shared, "layout") {
        return refused;
    }
    shared
        .counters
        .set_layout_changed(p.changed.unwrap_or(true));
    answer(&shared).into_response()
}

#[derive(Debug, Deserialize)]
struct BotWallParams {
    on: Option<bool>,
}

async fn bot_wall(
    State(shared): State<Arc<Shared>>,
    Query(p): Query<BotWallParams>,
) -> Json<MallStats> {
    shared.counters.set_bot_wall(p.on.unwrap_or(true));
    answer(&shared)
}

async fn wall_reports(State(shared): State<Arc<Shared>>) -> Json<WallReports> {
    Json(shared.counters.wall_reports())
}

#[derive(Debug, Deserialize)]
struct PriceParams {
    id: String,
    price: u64,
}

/// Serves listing `id` of this mall at `price` (KRW, > 0) from now on, on every page and
/// answer that shows it, until reset.
async fn price(State(shared): State<Arc<Shared>>, Query(p): Query<PriceParams>) -> Response {
    let id = p.id.trim();
    if shared.catalog.listing_by_id(shared.style, id).is_none() {
        return bad_request(format!("this {} mall lists no {id:?}", shared.style));
    }
    if p.price == 0 {
        return bad_request("price must be positive".to_owned());
    }
    shared.counters.set_price(id, p.price);
    Json(serde_json::json!({ "id": id, "price": p.price })).into_response()
}
