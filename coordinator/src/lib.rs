//! LPS coordinator: owns the PostgreSQL job queue and proxy ledger and serves the gRPC
//! services. The binary only parses config, initialises telemetry and runs the app; tests
//! start the same pieces.
#![forbid(unsafe_code)]

pub mod auth;
pub mod control;
pub mod db;
pub mod grpc;
pub mod queue;
pub mod reaper;
