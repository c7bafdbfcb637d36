//! The Chromium half of the node: everything that touches chromedriver and Chromium
//! (DESIGN §5). The browser executor (`executor/browser/`) composes these parts into jobs.
//!
//! - [`chromedriver`]: the WebDriver server, started and supervised by the node (or an
//!   external `LPS_WEBDRIVER_URL`);
//! - [`identity`]: one consistent browser identity (user agent, client hints, languages,
//!   timezone, screen, no automation traces) and the headless/headful mode;
//! - [`contexts`]: the node's own DevTools connection, which gives workers and
//!   out-of-process frames the page's identity before they run;
//! - [`display`]: the Xvfb of headful mode, started and supervised by the node;
//! - [`profile`]: user-data-dir slots under `LPS_PROFILE_ROOT`, one exclusive file lock each;
//! - [`instance`]: one browser (a running Chromium and its WebDriver session): launch
//!   flags, CDP resource blocking, bounded calls, close with its own timeout, kill;
//! - [`relay`]: the local proxy relay per browser (credentials and byte metering);
//! - [`page`]: reading a search-result page with a site profile (block first);
//! - [`navigate`]: human navigation — the home page, the search box, typed keys, Enter;
//! - [`parse`]: prices, shipping, search URLs;
//! - [`process`]: finding and killing a slot's browser processes;
//! - `http`: the small loopback HTTP client thirtyfour talks WebDriver through.
//!
//! Errors are one [`BrowserError`]; [`BrowserError::is_gone`] says whether the browser must
//! be replaced.

pub mod chromedriver;
pub mod contexts;
pub mod display;
pub mod error_pages;
mod http;
pub mod identity;
pub mod instance;
pub mod navigate;
pub mod page;
pub mod parse;
pub mod process;
pub mod profile;
pub mod relay;
pub mod scripts;

use std::time::Duration;

pub use chromedriver::ChromeDriver;
pub use display::Display;
pub use http::WebDriverHttp;
pub use identity::{BrowserMode, Identity};
pub use instance::{Browser, LaunchOptions, default_blocked_patterns};
pub use page::{PageRead, PageResult};
pub use profile::ProfileSlot;
pub use relay::{Relay, RelayCounters, Upstream};

/// What went wrong with a browser.
#[derive(Debug, Clone, thiserror::Error)]
pub enum BrowserError {
    /// The WebDriver server could not be started or reached.
    #[error("chromedriver: {0}")]
    Driver(String),
    /// Chromium did not start.
    #[error("the browser did not start: {0}")]
    Launch(String),
    /// The WebDriver session or the browser is gone (crashed, killed, chromedriver lost).
    #[error("the browser is gone: {0}")]
    Gone(String),
    /// A call did not answer in time: the browser hangs.
    #[error("{what} did not answer within {after:?}")]
    Timeout { what: &'static str, after: Duration },
    /// A call failed but the browser lives (a bad selector, a page-load timeout…).
    #[error("webdriver: {0}")]
    WebDriver(String),
    /// No profile slot could be taken.
    #[error("profile slot: {0}")]
    Profile(String),
    /// The proxy relay could not start.
    #[error("proxy relay: {0}")]
    Relay(String),
}

impl BrowserError {
    /// Whether the browser must be killed and replaced before it is used again.
    pub fn is_gone(&self) -> bool {
        match self {
            Self::Gone(_) | Self::Timeout { .. } | Self::Launch(_) | Self::Driver(_) => true,
            Self::WebDriver(_) | Self::Profile(_) | Self::Relay(_) => false,
        }
    }
}
