//! The fixture mall: a real HTTP server on loopback that behaves like a shopping mall.
//!
//! One instance serves one style ([`MallStyle::Alpha`], [`MallStyle::Beta`] or
//! [`MallStyle::Gamma`]) and the listings of that style from a [`Catalog`]. The styles
//! differ in markup (see [`markup`](mod@markup)), so different site profiles are really
//! exercised. Gamma is the mall with every trap of a real result page — inline JSON,
//! placeholders, lazy loading, two pages, card classes, shipping texts, a challenge, a
//! restriction page, a redesign switch and a JSON API; see [`gamma`].
//!
//! # Routes
//!
//! | route | what |
//! |---|---|
//! | `GET /` | home page with a search form (see [Home page](#home-page)) |
//! | `GET /search?q=…[&slow_ms=N]` | alpha, beta: search shell; its script fetches `/api/search` with the same query string and renders cards (or the no-result marker) after load; a blocked exit IP gets the block page instead |
//! | `GET /api/search?q=…[&slow_ms=N]` | alpha, beta: `{"query", "blocked", "block_html", "total", "items": [{"id","title","price","shipping","seller","url","image"}]}` |
//! | `GET /search?q=…[&page=N][&slow_ms=N]` | gamma: the result page with inline JSON ([`gamma`]) |
//! | `GET /openapi/v1/search.json?query=…&start=S&display=D` | gamma: JSON API, header `X-Gamma-Key` ([`gamma`]) |
//! | `GET /adcr?u=<path>` | gamma: ad click redirect (302) |
//! | `GET /img/<id>.jpg` | ~150 KB image body (`Cache-Control: no-store`) |
//! | `GET /fonts/mall.woff2` | ~100 KB web font body, used by every page via `@font-face` |
//! | `GET <listing.path>` | server-rendered detail page of a listing |
//! | `POST /_wall/verdict` | the bot wall's report endpoint (see [`wall`]); counted as a request, never as a search |
//!
//! Search matching is [`Catalog::search`]: full matches, then up to four related listings.
//!
//! # Home page
//!
//! Every page but the block, wall, challenge and restriction pages starts with the
//! style's header, whose search form works without JavaScript: a GET
//! `form[action="/search"]` with one text input `name="q"` and a submit button, so typing
//! a query and pressing Enter loads `/search?q=…`. The input's selector per style is
//! [`Markup::search_input`] — alpha `input#search-keyword`, beta `input#srp-query`, gamma
//! `input#g-query` — and `form[action="/search"] input[name="q"]` matches it in every
//! style.
//!
//! # Exit IPs, blocking and slowness
//!
//! The exit IP is the value of the [`EXIT_IP_HEADER`](crate::EXIT_IP_HEADER) request header
//! (set by the gateway; absent = [`DIRECT_EXIT`](crate::DIRECT_EXIT)). With `block_after =
//! Some(n)`, the n+1th search page request from one exit IP and every later one get the
//! block page (HTTP 200, small HTML with [`markup::block_marker_html`]). The bot wall
//! ([`wall`], off by default) blocks an exit IP the same way when it catches automation.
//! `slow_ms` on a search request, or the `slow` control, delays search responses that
//! are served.
//!
//! # Control endpoints (JSON; each answers with the current [`MallStats`] unless noted)
//!
//! | endpoint | effect |
//! |---|---|
//! | `GET /_control/stats` | read counters |
//! | `POST /_control/reset` | clear counters, forced blocks, slowness and prices set at run time, turn the bot wall off and forget its reports and cookies (keeps `block_after`) |
//! | `POST /_control/block?exit=exit-03` | block that exit IP until unblocked or reset |
//! | `POST /_control/unblock?exit=exit-03` | lift the block and clear its search count |
//! | `POST /_control/slow?ms=5000` | delay search pages and API by 5 s (`page_ms=`/`api_ms=` set one; `0` = off) |
//! | `POST /_control/block-after?n=3` | set the budget (`n` absent = never block) |
//! | `POST /_control/challenge?pages=1&after_ms=3000` | gamma: the next `pages` (default 1) search pages without a clearance cookie get the self-clearing interstitial, which sets the cookie and reloads after `after_ms` (default 3000, at most 60000); `pages=0` disarms |
//! | `POST /_control/restrict?on=true` | gamma: search pages answer HTTP 418 with the restriction page (`on=false` lifts it) |
//! | `POST /_control/layout?changed=true` | gamma: search pages use the redesigned markup without inline JSON (`changed=false` restores it) |
//! | `POST /_control/bot-wall?on=true` | every style: the bot wall guards search pages (`on=false` lifts it; `on` absent = `true`): a search page without the clearance cookie [`wall::WALL_COOKIE`] earned on its exit IP is checked by its headers (a signal blocks the exit IP at once) and then gets the wall page, whose script reports automation signals; a flagged report blocks the exit IP, a clean one sets the cookie; see [`wall`] |
//! | `POST /_control/price?id=a101&price=9900` | serve that listing of this mall at that price (KRW) on every page and answer from now on, until reset; an id the mall does not list or a price of 0 is 400 |
//! | `GET /_control/wall` | the bot wall's [`WallReports`]: `{"on", "exits": {"exit-01": {"status": "walled"\|"cleared"\|"blocked", "header_signals", "client_signals", "walls_served", "reports", "passes", "user_agent", "details"}}}` |
//!
//! The gamma controls answer HTTP 400 on alpha and beta. `reset` also disarms the
//! challenge, forgets issued clearance tokens, lifts the restriction and restores the
//! layout. Control requests are not counted in the stats. [`MallHandle`] has the same
//! controls as methods for in-process tests ([`MallHandle::set_bot_wall`] and
//! [`MallHandle::wall_reports`] for the bot wall).

mod assets;
mod control;
pub mod gamma;
pub mod markup;
pub mod pages;
mod routes;
mod state;
pub mod wall;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::{CancellationToken, DropGuard};
use tracing::Instrument;

use crate::catalog::{Catalog, MallStyle};
use crate::util::encode_query_value;

pub use assets::{FONT_BYTES, IMAGE_BYTES};
pub use gamma::GAMMA_API_KEY;
pub use markup::{GAMMA_MARKUP, GammaMarkup, Markup, format_price, format_shipping, markup};
pub use state::MallStats;
pub use wall::{ExitWall, WallReports, WallStatus};

/// The closest two search page arrivals from one exit IP came, per exit IP label, over
/// `arrivals` (several malls' [`MallHandle::search_arrivals`] together: an exit IP's pace
/// is what every mall it visits sees). Exits with a single arrival are left out.
pub fn closest_arrivals(
    arrivals: &[(String, std::time::Instant)],
) -> std::collections::BTreeMap<String, std::time::Duration> {
    let mut by_exit: std::collections::BTreeMap<&str, Vec<std::time::Instant>> =
        std::collections::BTreeMap::new();
    for (exit, at) in arrivals {
        by_exit.entry(exit.as_str()).or_default().push(*at);
    }
    by_exit
        .into_iter()
        .filter_map(|(exit, mut times)| {
            times.sort_unstable();
            let closest = times.windows(2).map(|w| w[1] - w[0]).min()?;
            Some((exit.to_owned(), closest))
        })
        .collect()
}

/// How many pairs of consecutive search page arrivals from one exit IP came closer than
/// `gap` (over `arrivals` as for [`closest_arrivals`]).
pub fn arrivals_closer_than(
    arrivals: &[(String, std::time::Instant)],
    gap: std::time::Duration,
) -> usize {
    let mut by_exit: std::collections::BTreeMap<&str, Vec<std::time::Instant>> =
        std::collections::BTreeMap::new();
    for (exit, at) in arrivals {
        by_exit.entry(exit.as_str()).or_default().push(*at);
    }
    by_exit
        .into_values()
        .map(|mut times| {
            times.sort_unstable();
            times.windows(2).filter(|w| w[1] - w[0] < gap).count()
        })
        .sum()
}

/// How long [`MallHandle::shutdown`] waits for in-flight requests before aborting them.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Errors starting or stopping a mall.
#[derive(Debug, thiserror::Error)]
pub enum MallError {
    /// The listen address could not be bound.
    #[error("cannot bind mall to {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The server failed while running.
    #[error("mall server failed: {0}")]
    Serve(#[source] std::io::Error),
    /// The server task panicked or was cancelled.
    #[error("mall server task ended abnormally: {0}")]
    Task(String),
}

/// What to start.
#[derive(Debug, Clone)]
pub struct MallConfig {
    /// Markup style, and which listings of the catalog are served.
    pub style: MallStyle,
    /// Listen address; port 0 picks a free port.
    pub listen: SocketAddr,
    /// What the mall sells.
    pub catalog: Arc<Catalog>,
    /// Block an exit IP after this many search page requests.
    pub block_after: Option<u32>,
    /// The key gamma's JSON API requires in `X-Gamma-Key` (ignored by alpha and beta).
    pub api_key: String,
}

impl MallConfig {
    /// A mall of `style` on `127.0.0.1:0` with the builtin catalog, never blocking.
    pub fn new(style: MallStyle) -> MallConfig {
        MallConfig {
            style,
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            catalog: Arc::new(Catalog::builtin()),
            block_after: None,
            api_key: GAMMA_API_KEY.to_owned(),
        }
    }

    /// Sets the catalog.
    pub fn with_catalog(mut self, catalog: Arc<Catalog>) -> MallConfig {
        self.catalog = catalog;
        self
    }

    /// Sets the listen address.
    pub fn with_listen(mut self, listen: SocketAddr) -> MallConfig {
        self.listen = listen;
        self
    }

    /// Sets the per-exit-IP search budget.
    pub fn with_block_after(mut self, block_after: Option<u32>) -> MallConfig {
        self.block_after = block_after;
        self
    }

    /// Sets the key of gamma's JSON API.
    pub fn with_api_key(mut self, api_key: impl Into<String>) -> MallConfig {
        self.api_key = api_key.into();
        self
    }
}

/// State shared by all handlers of one mall.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) style: MallStyle,
    /// The bound address (the host of gamma's absolute links).
    pub(crate) addr: SocketAddr,
    pub(crate) catalog: Arc<Catalog>,
    pub(crate) counters: state::Counters,
    pub(crate) api_key: String,
}

/// Entry point: `MallServer::start(config)`.
#[derive(Debug, Clone, Copy)]
pub struct MallServer;

impl MallServer {
    /// Binds the listen address and serves until [`MallHandle::shutdown`] (or until the
    /// handle is dropped).
    pub async fn start(config: MallConfig) -> Result<MallHandle, MallError> {
        let listener =
            TcpListener::bind(config.listen)
                .await
                .map_err(|source| MallError::Bind {
                    addr: config.listen,
                    source,
                })?;
        let addr = listener.local_addr().map_err(|source| MallError::Bind {
            addr: config.listen,
            source,
        })?;
        let shared = Arc::new(Shared {
            style: config.style,
            addr,
            catalog: config.catalog,
            counters: state::Counters::new(config.block_after),
            api_key: config.api_key,
        });
        let cancel = CancellationToken::new();
        let app = routes::router(Arc::clone(&shared));
        let stop = cancel.clone().cancelled_owned();
        let span = tracing::info_span!("mall.serve", mall.style = %config.style, mall.addr = %addr);
        let task = tokio::spawn(
            async move {
                tracing::info!("mall listening");
                axum::serve(listener, app)
                    .with_graceful_shutdown(stop)
                    .await
            }
            .instrument(span),
        );
        Ok(MallHandle {
            addr,
            shared,
            task,
            _stop_on_drop: cancel.clone().drop_guard(),
            cancel,
        })
    }
}

/// A running mall. Dropping it stops the server (without waiting); prefer
/// [`MallHandle::shutdown`].
#[derive(Debug)]
pub struct MallHandle {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: JoinHandle<std::io::Result<()>>,
    cancel: CancellationToken,
    _stop_on_drop: DropGuard,
}

impl MallHandle {
    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `http://127.0.0.1:PORT/search?q=<encoded query>`.
    pub fn search_url(&self, query: &str) -> String {
        format!("{}/search?q={}", self.base_url(), encode_query_value(query))
    }

    /// `…/search?q=<encoded query>&page=N` (gamma's result pages).
    pub fn search_page_url(&self, query: &str, page: usize) -> String {
        format!("{}&page={page}", self.search_url(query))
    }

    /// `…/openapi/v1/search.json?query=…&start=S&display=D` (gamma's JSON API; send the
    /// key of [`MallHandle::api_key`] in `X-Gamma-Key`).
    pub fn api_url(&self, query: &str, start: usize, display: usize) -> String {
        format!(
            "{}{}?query={}&start={start}&display={display}",
            self.base_url(),
            gamma::API_PATH,
            encode_query_value(query)
        )
    }

    /// The key gamma's JSON API requires.
    pub fn api_key(&self) -> &str {
        &self.shared.api_key
    }

    /// The style served.
    pub fn style(&self) -> MallStyle {
        self.shared.style
    }

    /// The catalog served.
    pub fn catalog(&self) -> &Arc<Catalog> {
        &self.shared.catalog
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> MallStats {
        self.shared.counters.snapshot()
    }

    /// When each search page request (those counted in [`MallStats::searches`]) arrived,
    /// with its exit IP label, in arrival order since the start or the last
    /// [`reset`](Self::reset): what a mall sees of one IP's pace.
    pub fn search_arrivals(&self) -> Vec<(String, std::time::Instant)> {
        self.shared.counters.arrivals()
    }

    /// Clears counters, forced blocks, slowness, gamma's states and the bot wall (off,
    /// its reports and cookies forgotten); keeps `block_after`.
    pub fn reset(&self) {
        self.shared.counters.reset();
    }

    /// Blocks an exit IP label (e.g. `exit-03`, or `direct`).
    pub fn block_exit(&self, exit: &str) {
        self.shared.counters.block_exit(exit);
    }

    /// Lifts a block and clears that exit IP's search count.
    pub fn unblock_exit(&self, exit: &str) {
        self.shared.counters.unblock_exit(exit);
    }

    /// Delays served search pages and API answers by `delay` (zero = off).
    pub fn set_slow(&self, delay: Duration) {
        self.shared.counters.set_slow(Some(delay), Some(delay));
    }

    /// Sets the per-exit-IP search budget.
    pub fn set_block_after(&self, block_after: Option<u32>) {
        self.shared.counters.set_block_after(block_after);
    }

    /// Gamma: the next `pages` search pages without a clearance cookie get the
    /// interstitial, which clears itself after `clears_after` (`pages = 0` disarms). Alpha
    /// and beta record it without effect.
    pub fn set_challenge(&self, pages: u32, clears_after: Duration) {
        let after = clears_after.min(gamma::MAX_CHALLENGE_DELAY);
        self.shared.counters.set_challenge(pages, after);
    }

    /// Gamma: search pages answer HTTP 418 with the restriction page while `on`. Alpha and
    /// beta record it without effect.
    pub fn set_restricted(&self, on: bool) {
        self.shared.counters.set_restricted(on);
    }

    /// Gamma: search pages use the redesigned markup (no inline JSON) while `on`. Alpha
    /// and beta record it without effect.
    pub fn set_layout_changed(&self, on: bool) {
        self.shared.counters.set_layout_changed(on);
    }

    /// Gamma: the next `pages` result pages fail half-way: scrolled, their next batch is
    /// requested from `/search/more`, which answers 429, and the page shows its error box
    /// ([`GAMMA_ERROR_TEXT`](crate::mall::gamma::GAMMA_ERROR_TEXT)) instead of more cards
    /// (`pages = 0` disarms). Alpha and beta record it without effect.
    pub fn set_scroll_failures(&self, pages: u32) {
        self.shared.counters.set_scroll_failures(pages);
    }

    /// Gamma: result page `page` (1-based) answers HTTP `status` with the error box the
    /// next `times` times it is asked for (`times = 0` disarms).
    pub fn set_page_failure(&self, page: usize, status: u16, times: u32) {
        self.shared.counters.set_page_failure(page, status, times);
    }

    /// Turns the bot wall in front of every style's search pages on or off (see
    /// [`wall`]); `reset` turns it off.
    pub fn set_bot_wall(&self, on: bool) {
        self.shared.counters.set_bot_wall(on);
    }

    /// What the bot wall decided per exit IP (the JSON of `GET /_control/wall`).
    pub fn wall_reports(&self) -> WallReports {
        self.shared.counters.wall_reports()
    }

    /// Stops accepting, lets in-flight requests finish for up to [`SHUTDOWN_GRACE`], then
    /// aborts what is left.
    pub async fn shutdown(self) -> Result<(), MallError> {
        self.cancel.cancel();
        let mut task = self.task;
        match tokio::time::timeout(SHUTDOWN_GRACE, &mut task).await {
            Ok(Ok(Ok(()))) => Ok(()),
            Ok(Ok(Err(e))) => Err(MallError::Serve(e)),
            Ok(Err(e)) => Err(MallError::Task(e.to_string())),
            Err(_elapsed) => {
                tracing::warn!(mall.addr = %self.addr, "mall shutdown grace elapsed, aborting");
                task.abort();
                Ok(())
            }
        }
    }
}
