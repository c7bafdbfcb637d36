//! LPS crawler node: connects to a coordinator over one bidirectional gRPC stream
//! (`lps.v1.NodeService/Connect`), runs the jobs it is assigned through an [`Executor`],
//! and reports their outcomes (DESIGN §3, §5).
//!
//! Start a node with [`Node::new`] + [`Node::run`]; watch it through a [`NodeHandle`].
//! The modules, one job each:
//! - [`config`]: settings from flags / `LPS_…` variables, validated;
//! - [`executor`]: the trait jobs run through, the [`BrowserExecutor`] (headless Chromium)
//!   and the [`ScriptedExecutor`] for tests;
//! - [`chromium`]: chromedriver, browsers (one running Chromium each), profile slots, the
//!   proxy relay, page reading;
//! - [`proxy`]: proxy ports and block reports as the executor sees them, over the stream;
//! - [`outbox`]: reports kept until acknowledged, resent after a reconnect;
//! - [`retry`]: which stream errors are fatal, and the reconnect backoff;
//! - [`welcome`]: what a Welcome says (the stream's timing, site profiles);
//! - `jobs`: the slot table (one task per job, deadlines, cancels);
//! - `link`: the stream task that ties them together;
//! - [`node`]: the public entry point and the status handle;
//! - [`health`]: `/healthz`, `/readyz` and `/metrics`;
//! - [`metrics`]: the node's Prometheus metrics;
//! - [`judge`]: matching result cards to the product (used by the browser executor);
//! - [`llm`]: the optional OpenAI-compatible endpoint for keywords and judging.
#![forbid(unsafe_code)]

pub mod chromium;
pub mod config;
pub mod executor;
pub mod health;
mod host;
mod jobs;
pub mod judge;
mod link;
pub mod llm;
pub mod metrics;
pub mod node;
pub mod outbox;
pub mod probe;
pub mod profile_tool;
pub mod proxy;
pub mod retry;
pub mod secret;
pub mod selfcheck;
mod state;
pub mod welcome;

pub use config::Config;
pub use executor::{BrowserExecutor, Executor, Job, Outcome, Progress, ScriptedExecutor};
pub use metrics::NodeMetrics;
pub use node::{Node, NodeError, NodeHandle, Status, StreamState};
