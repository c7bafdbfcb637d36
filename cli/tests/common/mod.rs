//! Helpers of the tests that run the built `lpsctl` against a real coordinator: the
//! coordinator's own test helpers (a coordinator on 127.0.0.1:0 with test tokens, TLS
//! certificates, a webhook receiver), and running `lpsctl`.
// NB: each test binary uses a different subset of these helpers.
#![allow(dead_code)]

use std::{path::PathBuf, time::Duration};

#[path = "../../../coordinator/tests/common/mod.rs"]
mod coordinator;

pub use coordinator::*;

/// Runs the built `lpsctl` against `addr` (a URL) with `token` and the extra environment
/// `envs`; its output, or a panic when it does not end within a minute.
pub async fn lpsctl(
    addr: &str,
    token: &str,
    envs: &[(&str, PathBuf)],
    args: &[&str],
) -> std::process::Output {
    let run = tokio::process::Command::new(env!("CARGO_BIN_EXE_lpsctl"))
        .args(args)
        .env("LPS_ADDR", addr)
        .env("LPS_TOKEN", token)
        .envs(envs.iter().map(|(k, v)| (*k, v.as_os_str())))
        .kill_on_drop(true)
        .output();
    tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("lpsctl hung")
        .unwrap()
}
