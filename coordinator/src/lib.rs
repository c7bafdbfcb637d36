//! LPS coordinator: owns the PostgreSQL job queue and proxy ledger and serves the gRPC
//! services. The binary only parses config, initialises telemetry and runs [`app`]; tests
//! start the same pieces.
//!
//! The modules by floor (DESIGN §1 "Layout"; imports run down, never up):
//! - the composer: [`app`] (the supervised task set and its shutdown) and [`config`]
//!   (flags and `LPS_…` variables, flattening each module's own arguments);
//! - the services, one table set each ("Table owners"): [`queue`] (jobs, searches,
//!   results, negative cache), [`ledger`] (proxy ports, cooldowns, IP sessions, blocks),
//!   [`node_session`] (one row per node id), [`delivery`] (the outbox to webhooks and the
//!   alert webhook), [`schedule`] (watchlists), [`retention`] (age-based deletes),
//!   [`profiles`] (site profiles and their live revisions);
//! - what runs on them: [`dispatch`] (one task per node stream), [`reaper`] (expired
//!   leases), [`alerts`] (rules over the ops snapshot), [`control`] (cross-replica
//!   cancel and drain), [`readiness`] (the database probe behind `/readyz` and health);
//! - the read side: [`search`] (what `SearchService` shows and the operator's levers),
//!   [`fleet`] (nodes and ports), [`ops`] (the ops snapshot), [`metrics`] (`/metrics`);
//! - the adapters: [`grpc`] (thin `pb::` ↔ model translations), [`auth`] (bearer tokens),
//!   [`tls`] (the gRPC port's certificates);
//! - the leaves every floor may use: [`error`] (the one service error and its gRPC
//!   mapping), [`settings`] (`ConfigError` and the duration helpers), [`db`] (the pool and
//!   the embedded migrations).
#![forbid(unsafe_code)]

pub mod alerts;
pub mod app;
pub mod auth;
pub mod config;
pub mod control;
pub mod db;
pub mod delivery;
pub mod dispatch;
pub mod error;
pub mod fleet;
pub mod grpc;
pub mod ledger;
pub mod metrics;
pub mod node_session;
pub mod ops;
pub mod profiles;
pub mod queue;
pub mod readiness;
pub mod reaper;
pub mod retention;
pub mod schedule;
pub mod search;
pub mod settings;
pub mod tls;
