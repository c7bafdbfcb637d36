//! LPS coordinator: owns the PostgreSQL job queue and proxy ledger and serves the gRPC
//! services. The binary only parses config, initialises telemetry and runs [`app`]; tests
//! start the same pieces.
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
