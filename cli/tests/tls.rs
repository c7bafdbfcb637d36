//! `lpsctl` over TLS: the built binary against the real coordinator serving TLS with
//! certificates made at test time, with and without a client certificate, with one the
//! coordinator does not trust, and without the CA.

use std::path::PathBuf;

use lps_coordinator::{app::Running, db::MIGRATOR};
use sqlx::PgPool;

mod common;

use common::{
    CLIENT_TOKEN,
    pki::{Pki, coordinator},
};

/// Runs the built `lpsctl` against the TLS coordinator.
async fn lpsctl(
    running: &Running,
    envs: &[(&str, PathBuf)],
    args: &[&str],
) -> std::process::Output {
    let addr = format!("https://{}", running.grpc_addr);
    common::lpsctl(&addr, CLIENT_TOKEN, envs, args).await
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn lpsctl_speaks_tls_with_and_without_a_client_certificate(pool: PgPool) {
    let pki = Pki::new("lpsctl");
    let c = coordinator(&pool, &pki, true).await;
    let ca = ("LPS_CA_CERT", pki.path("ca.crt"));

    let out = lpsctl(&c, std::slice::from_ref(&ca), &["ops", "--json"]).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ops: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(ops.is_object(), "{ops}");

    let out = lpsctl(
        &c,
        &[
            ca.clone(),
            ("LPS_CLIENT_CERT", pki.path("node.crt")),
            ("LPS_CLIENT_KEY", pki.path("node.key")),
        ],
        &["ops", "--json"],
    )
    .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // A certificate the coordinator does not trust fails the handshake.
    let out = lpsctl(
        &c,
        &[
            ca.clone(),
            ("LPS_CLIENT_CERT", pki.path("rogue.crt")),
            ("LPS_CLIENT_KEY", pki.path("rogue.key")),
        ],
        &["ops", "--json"],
    )
    .await;
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());

    // Without the CA lpsctl does not trust the coordinator.
    let out = lpsctl(&c, &[], &["ops", "--json"]).await;
    assert!(!out.status.success());
    c.shutdown().await;
}
