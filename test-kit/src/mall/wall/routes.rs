//! The wall's HTTP side: the gate the search page handlers of every style call, and the
//! report endpoint [`WALL_VERDICT_PATH`]. Thin adapters over
//! [`Counters`](crate::mall::state::Counters); the decisions are [`super::WallBook`]'s.

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::post;
use bytes::Bytes;

use crate::mall::routes::{cookie_value, exit_label, no_store};
use crate::mall::wall::{
    WALL_COOKIE, WALL_COOKIE_MAX_AGE, WALL_VERDICT_PATH, WallGate, WallReport, WallVerdict,
    header_signals, wall_page,
};
use crate::mall::{Shared, pages};

pub(crate) fn routes() -> Router<Arc<Shared>> {
    Router::new().route(WALL_VERDICT_PATH, post(verdict))
}

/// The wall's answer for a search page request from `exit` that passed the budget:
/// `None` to serve the page (wall off or a valid clearance cookie), else the block page
/// (header signals) or the wall page.
pub(crate) fn gate(shared: &Shared, exit: &str, headers: &HeaderMap) -> Option<Response> {
    if !shared.counters.bot_wall() {
        return None;
    }
    let cookie = cookie_value(headers, WALL_COOKIE);
    let user_agent = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok());
    let signals = header_signals(headers);
    match shared
        .counters
        .wall_gate(exit, cookie.as_deref(), &signals, user_agent)
    {
        WallGate::Pass => None,
        WallGate::Block => {
            tracing::info!(mall.style = %shared.style, exit = %exit, signals = ?signals, "bot wall blocked by headers");
            Some(no_store(Html(pages::block_page(shared.style))))
        }
        WallGate::Wall { nonce } => {
            tracing::info!(mall.style = %shared.style, exit = %exit, "bot wall served");
            Some(no_store(Html(wall_page(shared.style, &nonce))))
        }
    }
}

fn refuse(status: StatusCode, message: String) -> Response {
    let mut response = no_store(Json(serde_json::json!({ "error": message })));
    *response.status_mut() = status;
    response
}

/// `POST /_wall/verdict`: evaluates a report; 200 `{"verdict":"cleared"}` with the
/// clearance cookie, 200 `{"verdict":"blocked"}`, 400 for a body that is not a report,
/// 403 for an unknown or foreign nonce.
async fn verdict(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let exit = exit_label(&headers);
    let report: WallReport = match serde_json::from_slice(&body) {
        Ok(report) => report,
        Err(e) => return refuse(StatusCode::BAD_REQUEST, format!("not a wall report: {e}")),
    };
    match shared.counters.wall_verdict(&exit, report) {
        Err(refusal) => {
            tracing::info!(exit = %exit, error = %refusal, "bot wall report refused");
            refuse(StatusCode::FORBIDDEN, refusal.to_string())
        }
        Ok(WallVerdict::Blocked { signals }) => {
            tracing::info!(mall.style = %shared.style, exit = %exit, signals = ?signals, "bot wall blocked by report");
            no_store(Json(serde_json::json!({ "verdict": "blocked" })))
        }
        Ok(WallVerdict::Cleared { token }) => {
            tracing::info!(mall.style = %shared.style, exit = %exit, "bot wall cleared");
            let cookie = format!(
                "{WALL_COOKIE}={token}; Path=/; HttpOnly; SameSite=Lax; Max-Age={WALL_COOKIE_MAX_AGE}"
            );
            let mut response = no_store(Json(serde_json::json!({ "verdict": "cleared" })));
            // NB: the token is `[0-9a-z]`, so the header value is always valid.
            if let Ok(value) = HeaderValue::from_str(&cookie) {
                response.headers_mut().insert(header::SET_COOKIE, value);
            }
            response.into_response()
        }
    }
}
