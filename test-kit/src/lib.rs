//! LPS test kit: real loopback servers that stand in for the internet in tests and in the
//! one-command demo.
//!
//! - [`mall`]: the fixture shopping mall (three markups: `alpha` and `beta`, and `gamma`
//!   with every trap of a real result page — inline JSON, placeholders, lazy loading, two
//!   pages, ads and other card classes, shipping texts, a challenge, HTTP 418, a redesign
//!   switch and a JSON API), with results rendered by JavaScript, heavy images and fonts,
//!   per-exit-IP bot blocking, an optional bot wall that detects automated browsers, and
//!   slow responses on demand.
//! - [`gateway`]: the fake proxy gateway; K loopback ports, each a sticky "exit IP", that
//!   forward only to allowed loopback addresses and tag requests with [`EXIT_IP_HEADER`].
//! - [`leaks`]: leak pages, one probe each of what tells an automated browser (a DevTools
//!   client, automation globals …), as a detector in a mall's page runs it, and the public
//!   detectors (BotD, fpscanner) fetched from npm at test time.
//! - [`catalog`]: what the malls sell (`test-kit/catalog.toml`), how a mall searches it,
//!   and the truth a correct reading must report ([`Catalog::truth`]).
//! - [`stack`]: the three malls plus a gateway in one call (what `lps-test-kit serve` runs).
//! - [`checks`]: promtool on a `/metrics` text, and flag names against their variables.
//! - [`binaries`]: other workspace packages' binaries, built for tests that run them.
//!
//! Nothing here ever connects beyond the loopback interface.
#![forbid(unsafe_code)]

pub mod binaries;
pub mod catalog;
pub mod checks;
pub mod gateway;
pub mod leaks;
pub mod mall;
pub mod stack;

mod util;

/// Request header the gateway sets on forwarded requests: the label of the exit IP (port)
/// the request left through, e.g. `exit-03`. The mall counts and blocks per value.
pub const EXIT_IP_HEADER: &str = "x-lps-exit-ip";

/// The exit IP a mall records for a request that did not come through the gateway.
pub const DIRECT_EXIT: &str = "direct";

pub use catalog::{
    Catalog, CatalogError, Delivery, Listing, ListingKind, MallStyle, PricedListing, Product, Truth,
};
pub use gateway::{Gateway, GatewayConfig, GatewayError, GatewayHandle, PortStats};
pub use mall::{MallConfig, MallError, MallHandle, MallServer, MallStats};
pub use stack::{Stack, StackConfig, StackHandle};
