//! Leak pages: one page per way a page can tell an automated browser, each running one
//! probe as the page's own first script — as a detector a mall embeds would — and
//! publishing its verdict in `window.__leakProbe`:
//! `{ leaked: bool, seen: "what it saw" }` (absent while the probe still runs).
//!
//! The probes are this module's `.js` files ([`PROBES`]); [`LeakPages`] serves them on
//! loopback at `/leak/<name>` (and the contexts probe's worker scripts beside them). Tests drive a real Chromium through the node's launch path
//! to every page and fail when a probe reports a leak; a test with a stock chromedriver
//! shows each probe can fail. Nothing here is persisted.

pub mod detectors;

use std::{net::SocketAddr, sync::Arc};

use axum::{
    Router,
    extract::Path,
    http::{StatusCode, header},
    response::{Html, IntoResponse},
    routing::get,
};
use tokio::net::TcpListener;

/// One probe: what it tests and its script.
#[derive(Debug, Clone, Copy)]
pub struct Probe {
    /// The page's name in `/leak/<name>`.
    pub name: &'static str,
    /// The signal, as a detector names it.
    pub signal: &'static str,
    /// The page's script.
    pub script: &'static str,
}

/// Every probe (DESIGN §5 "Browser identity").
pub const PROBES: &[Probe] = &[
    Probe {
        name: "cdp-runtime",
        signal: "a DevTools client with Runtime enabled (console arguments serialised)",
        script: include_str!("cdp_runtime.js"),
    },
    Probe {
        name: "automation-globals",
        signal: "automation globals (listed names, aliases of builtins)",
        script: include_str!("automation_globals.js"),
    },
    Probe {
        name: "native-functions",
        signal: "replaced builtins that do not read as native (fetch, XHR, WebGL, toString)",
        script: include_str!("native_functions.js"),
    },
    Probe {
        name: "contexts",
        signal: "an identity that differs between the page and its iframes or workers",
        script: concat!(include_str!("collect.js"), include_str!("contexts.js")),
    },
];

/// `collect`, what one context shows of the identity, for the contexts probe's workers.
const COLLECT_JS: &str = include_str!("collect.js");
/// The contexts probe's service worker.
const CONTEXTS_SW_JS: &str = include_str!("contexts_sw.js");
/// The contexts probe's cross-site frame (its page's script).
pub const CONTEXTS_FRAME_JS: &str = concat!(
    include_str!("collect.js"),
    include_str!("contexts_frame.js")
);

/// The contexts probe's cross-site frame page.
pub fn contexts_frame_page() -> String {
    format!(
        "<!doctype html><html lang=\"ko\"><head><meta charset=\"utf-8\"><script>{CONTEXTS_FRAME_JS}</script></head><body></body></html>"
    )
}

/// The probe named `name`.
pub fn probe(name: &str) -> Option<&'static Probe> {
    PROBES.iter().find(|p| p.name == name)
}

/// The page of `probe`: its script first in `<head>`, before anything else runs.
pub fn page(probe: &Probe) -> String {
    format!(
        "<!doctype html><html lang=\"ko\"><head><meta charset=\"utf-8\"><script>{}</script><title>{}</title></head><body><p>{}</p></body></html>",
        probe.script, probe.name, probe.signal
    )
}

/// The leak pages' loopback server; stops when dropped.
#[derive(Debug)]
pub struct LeakPages {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl LeakPages {
    /// Serves every probe's page on `127.0.0.1:0`.
    ///
    /// # Errors
    /// The listener cannot be bound.
    pub async fn start() -> std::io::Result<Self> {
        Self::start_with(None).await
    }

    /// [`Self::start`], with the public detectors' pages too: `/detector/botd` and
    /// `/detector/fpscanner` ([`detectors`]).
    ///
    /// # Errors
    /// The listener cannot be bound.
    pub async fn start_with(detectors: Option<detectors::Detectors>) -> std::io::Result<Self> {
        let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
        let addr = listener.local_addr()?;
        let mut app = Router::new();
        if let Some(d) = detectors {
            let botd = Arc::new(d.botd);
            let fpscanner = Arc::new(d.fpscanner);
            app = app
                .route(
                    "/detector/botd",
                    get(|| async { Html(detectors::BOTD_PAGE) }),
                )
                .route(
                    "/detector/fpscanner",
                    get(|| async { Html(detectors::FPSCANNER_PAGE) }),
                )
                .route(
                    "/detector/botd.js",
                    get(move || {
                        let s = botd.clone();
                        async move { module(&s) }
                    }),
                )
                .route(
                    "/detector/fpscanner.js",
                    get(move || {
                        let s = fpscanner.clone();
                        async move { module(&s) }
                    }),
                );
        }
        let app = app
            .route("/leak/{name}", get(serve))
            .route("/leak/collect.js", get(|| async { script(COLLECT_JS) }))
            .route(
                "/leak/contexts-frame",
                get(|| async { Html(contexts_frame_page()) }),
            )
            .route(
                "/leak/contexts-sw.js",
                get(|| async { script(CONTEXTS_SW_JS) }),
            );
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self { addr, task })
    }

    /// The URL of a public detector's page (`botd`, `fpscanner`; served by
    /// [`Self::start_with`] only).
    pub fn detector_url(&self, name: &str) -> String {
        format!("http://{}/detector/{name}", self.addr)
    }

    /// The URL of `probe`'s page.
    pub fn url(&self, probe: &Probe) -> String {
        format!("http://{}/leak/{}", self.addr, probe.name)
    }
}

impl Drop for LeakPages {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn module(source: &str) -> axum::response::Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        source.to_owned(),
    )
        .into_response()
}

fn script(source: &'static str) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        source,
    )
}

async fn serve(Path(name): Path<String>) -> impl IntoResponse {
    match probe(&name) {
        Some(p) => Html(page(p)).into_response(),
        None => (StatusCode::NOT_FOUND, "no such probe").into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_probe_has_a_unique_name_and_publishes_its_verdict() {
        for (i, p) in PROBES.iter().enumerate() {
            assert!(
                PROBES[..i].iter().all(|q| q.name != p.name),
                "{} twice",
                p.name
            );
            assert!(p.script.contains("window.__leakProbe"), "{}", p.name);
            assert!(page(p).contains(p.script));
        }
    }
}
