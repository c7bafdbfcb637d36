//! No orphaned browsers: a node killed with SIGKILL (no chance to clean up) leaves no
//! Chromium, chromedriver or Xvfb behind — each process group it started has a watchdog
//! that kills the group once the node is gone (`chromium::process::die_with_node`).

use std::{
    process::Stdio,
    time::{Duration, Instant},
};

use lps_crawler_node::chromium::process;

#[tokio::test]
async fn a_node_killed_with_sigkill_leaves_no_browser_behind() {
    let root = std::env::temp_dir().join(format!("lps-orphans-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    // The start-up self-check launches chromedriver and Chromium at once; no coordinator is
    // needed for that (the node keeps trying to reach the address meanwhile).
    let mut node = std::process::Command::new(env!("CARGO_BIN_EXE_crawler-node"))
        .env("LPS_COORDINATOR_URL", "http://127.0.0.1:9")
        .env("LPS_NODE_TOKEN", "orphans-test-token")
        .env("LPS_NODE_ID", "orphans")
        .env("LPS_HTTP_ADDR", "127.0.0.1:0")
        .env("LPS_PROFILE_ROOT", &root)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let needle = root.display().to_string();
    let started = Instant::now();
    let mut browser = Vec::new();
    while started.elapsed() < Duration::from_secs(30) {
        browser = process::pids_mentioning(&needle);
        if browser.len() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!browser.is_empty(), "the node started no browser");
    let group = browser.clone();
    node.kill().unwrap(); // SIGKILL
    let _ = node.wait();
    let killed = Instant::now();
    let mut left = process::pids_mentioning(&needle);
    while !left.is_empty() && killed.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        left = process::pids_mentioning(&needle);
    }
    if !left.is_empty() {
        process::kill_pids(&left).await;
    }
    // (The self-check's profile is inside the root.)
    let _ = std::fs::remove_dir_all(&root);
    assert!(
        left.is_empty(),
        "5 s after the node was killed, {} of its {} browser processes live on: {left:?}",
        left.len(),
        group.len()
    );
}

/// Logs written to a pipe (a file, a collector) carry no ANSI colour codes.
#[tokio::test]
async fn logs_to_a_pipe_have_no_colour_codes() {
    use std::io::Read as _;
    let mut node = std::process::Command::new(env!("CARGO_BIN_EXE_crawler-node"))
        .env("LPS_COORDINATOR_URL", "http://127.0.0.1:9")
        .env("LPS_NODE_TOKEN", "ansi-test-token")
        .env("LPS_NODE_ID", "ansi")
        .env("LPS_HTTP_ADDR", "127.0.0.1:0")
        .env("LPS_EXECUTOR", "scripted")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    node.kill().unwrap();
    let _ = node.wait();
    let mut out = String::new();
    node.stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let mut err = String::new();
    node.stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let all = format!("{out}{err}");
    assert!(all.contains("crawler node starting"), "{all}");
    assert!(
        !all.contains('\u{1b}'),
        "colour codes in piped logs: {all:?}"
    );
}
