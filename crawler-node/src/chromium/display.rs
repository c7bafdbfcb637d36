//! The X display of headful mode: one Xvfb per node, started and supervised by the node
//! like chromedriver (`LPS_BROWSER_MODE=headful`).
//!
//! Invariants:
//! - [`Display::ensure`] returns the `:N` of a running Xvfb whose socket exists; one that
//!   died is started again on the same display number, so the chromedriver (and every
//!   Chromium it starts) keeps its `DISPLAY`.
//! - The display number is chosen once: the first free one from [`FIRST_DISPLAY`] (no lock
//!   file, no socket).
//! - Xvfb runs in its own process group; [`Display::stop`] kills it, and `kill_on_drop`
//!   covers a node that never called `stop`.

use std::{path::PathBuf, process::Stdio, time::Duration};

use tokio::{process::Child, sync::Mutex, time::Instant};
use tracing::{info, warn};

use super::{BrowserError, identity::SCREEN, process};

/// The first display number tried.
pub const FIRST_DISPLAY: u32 = 90;
/// Display numbers tried after it.
const DISPLAYS: u32 = 200;
/// How long a fresh Xvfb may take to create its socket.
const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// A supervised Xvfb (see the module docs).
#[derive(Debug)]
pub struct Display {
    xvfb: PathBuf,
    running: Mutex<Option<Running>>,
}

#[derive(Debug)]
struct Running {
    child: Child,
    pid: u32,
    number: u32,
    /// Xvfb's process group, watched so it dies with the node.
    group: process::WatchedGroup,
}

impl Running {
    async fn kill(&self) {
        self.group.kill().await;
    }
}

impl Display {
    /// An Xvfb from `xvfb` (the binary), started when first needed.
    pub fn new(xvfb: impl Into<PathBuf>) -> Self {
        Self {
            xvfb: xvfb.into(),
            running: Mutex::new(None),
        }
    }

    /// The `DISPLAY` value of a running Xvfb, starting (or restarting) it.
    ///
    /// # Errors
    /// [`BrowserError::Driver`] when Xvfb cannot be started.
    pub async fn ensure(&self) -> Result<String, BrowserError> {
        let mut running = self.running.lock().await;
        let mut number = None;
        if let Some(r) = running.as_mut() {
            match r.child.try_wait() {
                Ok(None) => return Ok(format!(":{}", r.number)),
                Ok(Some(status)) => {
                    warn!(xvfb.pid = r.pid, %status, "Xvfb died; starting it again");
                }
                Err(e) => warn!(error = %e, "cannot check Xvfb; starting it again"),
            }
            number = Some(r.number);
            if let Some(old) = running.take() {
                old.kill().await;
            }
        }
        let number = match number {
            Some(n) => n,
            None => free_display()
                .ok_or_else(|| BrowserError::Driver("no free X display number".into()))?,
        };
        let started = self.start(number).await.map_err(BrowserError::Driver)?;
        *running = Some(started);
        Ok(format!(":{number}"))
    }

    async fn start(&self, number: u32) -> Result<Running, String> {
        // A dead Xvfb may leave its lock and socket behind.
        let _ = std::fs::remove_file(lock_file(number));
        let _ = std::fs::remove_file(socket(number));
        let mut cmd = tokio::process::Command::new(&self.xvfb);
        cmd.arg(format!(":{number}"))
            .args([
                "-screen",
                "0",
                &format!("{}x{}x24", SCREEN.0, SCREEN.1),
                "-nolisten",
                "tcp",
                "-noreset",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .process_group(0);
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", self.xvfb.display()))?;
        let pid = child.id().unwrap_or_default();
        let group = process::WatchedGroup::watch(pid, "Xvfb");
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Ok(Some(exit)) = child.try_wait() {
                group.forget().await;
                return Err(format!("Xvfb :{number} exited at start: {exit}"));
            }
            if socket(number).exists() {
                info!(xvfb.pid = pid, display = number, "Xvfb ready");
                return Ok(Running {
                    child,
                    pid,
                    number,
                    group,
                });
            }
            if Instant::now() >= deadline {
                group.kill().await;
                return Err(format!("Xvfb :{number} not ready within {READY_TIMEOUT:?}"));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Kills the Xvfb; the next [`Display::ensure`] starts it again.
    pub async fn stop(&self) {
        let mut running = self.running.lock().await;
        if let Some(mut old) = running.take() {
            old.kill().await;
            let _ = tokio::time::timeout(Duration::from_secs(5), old.child.wait()).await;
            let _ = std::fs::remove_file(lock_file(old.number));
            let _ = std::fs::remove_file(socket(old.number));
            info!(display = old.number, "Xvfb stopped");
        }
    }
}

fn lock_file(number: u32) -> PathBuf {
    PathBuf::from(format!("/tmp/.X{number}-lock"))
}

fn socket(number: u32) -> PathBuf {
    PathBuf::from(format!("/tmp/.X11-unix/X{number}"))
}

/// The first display number with neither a lock file nor a socket.
fn free_display() -> Option<u32> {
    (FIRST_DISPLAY..FIRST_DISPLAY + DISPLAYS)
        .find(|&n| !lock_file(n).exists() && !socket(n).exists())
}
