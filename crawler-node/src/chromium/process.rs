//! Finding and killing browser processes: the last resort when a browser misbehaves, and
//! the sweep that guarantees no Chromium outlives the node.
//!
//! Chromium is started by chromedriver, not by the node, so the node does not know its
//! pid. Every Chromium process of a slot carries `--user-data-dir=<slot dir>` on its command
//! line, and slot directories are exclusive (file lock), so "every process whose command
//! line mentions the slot directory" is exactly that slot's browser. Linux `/proc` only;
//! elsewhere nothing is found. Killing shells out to `kill(1)` because the crate forbids
//! `unsafe` (and with it `libc::kill`).

use std::{path::Path, process::Stdio};

/// Pids of processes other than this one whose command line contains `needle`.
pub fn pids_mentioning(needle: &str) -> Vec<u32> {
    let own = std::process::id();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != own)
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains(needle))
                .unwrap_or(false)
        })
        .collect()
}

/// Pids of the browser processes using `dir` as their user-data-dir.
pub fn browser_pids(dir: &Path) -> Vec<u32> {
    pids_mentioning(&format!("--user-data-dir={}", dir.display()))
}

/// SIGKILLs `pids` (already gone ones are ignored). Returns how many were signalled.
pub async fn kill_pids(pids: &[u32]) -> usize {
    if pids.is_empty() {
        return 0;
    }
    let mut cmd = tokio::process::Command::new("kill");
    cmd.arg("-KILL")
        .args(pids.iter().map(u32::to_string))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let _ = cmd.status().await;
    pids.len()
}

/// SIGKILLs the process group `pgid` (a group the node created with `process_group(0)`).
pub async fn kill_group(pgid: u32) {
    let mut cmd = tokio::process::Command::new("kill");
    cmd.args(["-KILL", "--", &format!("-{pgid}")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let _ = cmd.status().await;
}

/// SIGKILLs `pids` and the process group `pgid` at once, without async (for a process
/// about to exit: the last resort when there is no time to close browsers).
pub fn kill_now(pids: &[u32], pgid: Option<u32>) {
    let mut args: Vec<String> = vec!["-KILL".into(), "--".into()];
    args.extend(pgid.map(|g| format!("-{g}")));
    args.extend(pids.iter().map(u32::to_string));
    if args.len() > 2 {
        let _ = std::process::Command::new("kill")
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// Kills every browser process of `dir` and waits (up to 5 s) until none is left; returns
/// the pids still alive after that (empty when all are gone).
pub async fn kill_browser(dir: &Path) -> Vec<u32> {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let pids = browser_pids(dir);
        if pids.is_empty() {
            return pids;
        }
        if tokio::time::Instant::now() >= deadline {
            return pids;
        }
        kill_pids(&pids).await;
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Makes the process group `pgid` die with this node, even when the node is killed with
/// SIGKILL and cannot clean up: a small watchdog (`/bin/sh`, in a process group of its own
/// so a signal to the node's group does not reach it) polls the node's pid every second
/// and, once the node is gone, SIGKILLs the group. It exits by itself when the group is
/// gone first (a chromedriver that was stopped or replaced). Chromium is chromedriver's child in its
/// process group, so a dead node leaves no browser behind (the field lesson of the orphaned
/// browsers: 19 processes lived on after `kill -9` of a node).
///
/// Returns the watchdog's pid, which is also its process group: a caller that stops the
/// group itself kills that group too (`kill_group`), so no watchdog outlives a clean stop.
///
/// # Errors
/// The watchdog could not be started (no `/bin/sh`): the caller logs it; the group then dies
/// with the node only when the node exits normally.
pub fn die_with_node(pgid: u32) -> std::io::Result<u32> {
    let node = std::process::id();
    // NB: `env kill`: the external kill(1); dash's builtin cannot signal a process group.
    let script = format!(
        "while kill -0 {node} 2>/dev/null && env kill -0 -- -{pgid} 2>/dev/null; do sleep 1; done; \
         env kill -s KILL -- -{pgid} 2>/dev/null; exit 0"
    );
    let mut cmd = std::process::Command::new("/bin/sh");
    cmd.args(["-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    // NB: not waited for on purpose: it must outlive the node; a node that exits normally
    // kills the group itself and the watchdog then sees it gone and exits.
    let child = cmd.spawn()?;
    let pid = child.id();
    drop(child);
    Ok(pid)
}

/// A process group the node started (a chromedriver with its Chromium, an Xvfb), with the
/// watchdog that kills it should the node die ([`die_with_node`]).
#[derive(Debug, Clone, Copy)]
pub struct WatchedGroup {
    /// The group (its leader's pid).
    pub pgid: u32,
    watchdog: Option<u32>,
}

impl WatchedGroup {
    /// Watches the group `pgid` (`what` names it in the log when no watchdog can start: the
    /// group then dies with the node only when the node exits normally).
    pub fn watch(pgid: u32, what: &str) -> Self {
        let watchdog = match die_with_node(pgid) {
            Ok(watchdog) => Some(watchdog),
            Err(e) => {
                tracing::warn!(error = %e, what, "cannot start the watchdog that kills this with the node");
                None
            }
        };
        Self { pgid, watchdog }
    }

    /// Kills the group, then its watchdog (so neither outlives a clean stop).
    pub async fn kill(&self) {
        kill_group(self.pgid).await;
        self.forget().await;
    }

    /// Stops only the watchdog (the group is gone already).
    pub async fn forget(&self) {
        if let Some(watchdog) = self.watchdog {
            kill_group(watchdog).await;
        }
    }
}
