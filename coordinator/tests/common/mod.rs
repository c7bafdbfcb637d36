//! Helpers shared by the coordinator's service tests: a real coordinator on 127.0.0.1:0
//! with test tokens, on a pool of its own (its shutdown closes that pool; the test's
//! `#[sqlx::test]` pool stays usable for assertions).
// NB: each test binary uses a different subset of these helpers.
#![allow(dead_code)]

use clap::Parser as _;
use lps_coordinator::{
    app::{self, Running},
    config::Cli,
};
use sqlx::{PgPool, postgres::PgPoolOptions};
use tonic::Request;

pub const NODE_TOKEN: &str = "node-token-for-tests-0001";
pub const CLIENT_TOKEN: &str = "client-token-for-tests-01";

/// Starts a coordinator on the test database with `extra` flags on top of the defaults
/// (loopback addresses, the test tokens). `--grpc-addr` in `extra` replaces the default.
pub async fn start(pool: &PgPool, extra: &[&str]) -> Running {
    let mut args = vec![
        "coordinator",
        "--database-url",
        "postgres://unused",
        "--http-addr",
        "127.0.0.1:0",
        "--client-tokens",
        CLIENT_TOKEN,
        "--node-tokens",
        NODE_TOKEN,
    ];
    if !extra.contains(&"--grpc-addr") {
        args.extend(["--grpc-addr", "127.0.0.1:0"]);
    }
    args.extend_from_slice(extra);
    let config = Cli::try_parse_from(args).unwrap().serve.validate().unwrap();
    let own = PgPoolOptions::new()
        .max_connections(10)
        .connect_with(pool.connect_options().as_ref().clone())
        .await
        .unwrap();
    app::start_with_pool(config, own).await.unwrap()
}

/// `message` with `authorization: Bearer <token>`.
pub fn with_token<T>(message: T, token: &str) -> Request<T> {
    let mut request = Request::new(message);
    request
        .metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    request
}
