//! The WebDriver server: a chromedriver the node starts and supervises itself
//! (`LPS_CHROMEDRIVER_PATH`, on a free loopback port), or a given `LPS_WEBDRIVER_URL`.
//!
//! Owns the chromedriver child process. Invariants:
//! - [`ChromeDriver::url`] returns the URL of a server that answered `/status` ready; a
//!   managed chromedriver that has died is started again (on a new port) by the next call,
//!   so one crash costs the sessions it held, not the node.
//! - The child runs in its own process group; [`ChromeDriver::stop`] kills that group, and
//!   `kill_on_drop` covers a node that never called `stop`.
//!
//! Cancellation: `url` holds an async mutex while it starts the server; dropping the call
//! mid-start kills the half-started child (kill-on-drop) and the next call starts afresh.

use std::{
    path::PathBuf,
    process::Stdio,
    sync::atomic::{AtomicU32, Ordering},
    time::Duration,
};

use hyper::{Method, Uri};
use tokio::{process::Child, sync::Mutex, time::Instant};
use tracing::{info, instrument, warn};

use super::{BrowserError, http::WebDriverHttp, process};

/// How long a fresh chromedriver may take to answer `/status` ready.
const READY_TIMEOUT: Duration = Duration::from_secs(20);
/// Attempts to start a chromedriver (each on a new port) before giving up.
const START_ATTEMPTS: u32 = 3;

/// Where WebDriver sessions are created.
#[derive(Debug)]
pub struct ChromeDriver {
    mode: Mode,
    running: Mutex<Option<Running>>,
    /// The running chromedriver's pid (0: none), readable without the async lock.
    pid: AtomicU32,
    http: WebDriverHttp,
}

#[derive(Debug)]
enum Mode {
    Managed { path: PathBuf },
    External { url: String },
}

#[derive(Debug)]
struct Running {
    child: Child,
    pid: u32,
    url: String,
    started: Instant,
}

impl ChromeDriver {
    /// A chromedriver the node starts from `path` when first needed.
    pub fn managed(path: impl Into<PathBuf>) -> Self {
        Self {
            mode: Mode::Managed { path: path.into() },
            running: Mutex::new(None),
            pid: AtomicU32::new(0),
            http: WebDriverHttp::new(Duration::from_secs(5)),
        }
    }

    /// A WebDriver server someone else runs.
    pub fn external(url: impl Into<String>) -> Self {
        Self {
            mode: Mode::External {
                url: url.into().trim_end_matches('/').to_owned(),
            },
            running: Mutex::new(None),
            pid: AtomicU32::new(0),
            http: WebDriverHttp::new(Duration::from_secs(5)),
        }
    }

    /// The URL of a ready WebDriver server, starting (or restarting) the managed one.
    pub async fn url(&self) -> Result<String, BrowserError> {
        let path = match &self.mode {
            Mode::External { url } => return Ok(url.clone()),
            Mode::Managed { path } => path,
        };
        let mut running = self.running.lock().await;
        if let Some(r) = running.as_mut() {
            match r.child.try_wait() {
                Ok(None) => return Ok(r.url.clone()),
                Ok(Some(status)) => warn!(
                    chromedriver.pid = r.pid,
                    %status,
                    uptime = ?r.started.elapsed(),
                    "chromedriver died; starting a new one"
                ),
                Err(err) => warn!(error = %err, "cannot check chromedriver; starting a new one"),
            }
            if let Some(old) = running.take() {
                process::kill_group(old.pid).await;
            }
        }
        let mut last = String::new();
        for attempt in 1..=START_ATTEMPTS {
            match self.start(path).await {
                Ok(started) => {
                    let url = started.url.clone();
                    self.pid.store(started.pid, Ordering::SeqCst);
                    *running = Some(started);
                    return Ok(url);
                }
                Err(err) => {
                    warn!(attempt, error = %err, "chromedriver did not start");
                    last = err;
                }
            }
        }
        Err(BrowserError::Driver(last))
    }

    #[instrument(name = "browser.chromedriver_start", skip_all, fields(path = %path.display()))]
    async fn start(&self, path: &PathBuf) -> Result<Running, String> {
        let port = free_port().map_err(|e| format!("no free loopback port: {e}"))?;
        let mut cmd = tokio::process::Command::new(path);
        cmd.arg(format!("--port={port}"))
            .arg("--allowed-ips=127.0.0.1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .process_group(0);
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", path.display()))?;
        let pid = child.id().unwrap_or_default();
        let url = format!("http://127.0.0.1:{port}");
        let status: Uri = format!("{url}/status")
            .parse()
            .map_err(|e| format!("bad status URL: {e}"))?;
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Ok(Some(exit)) = child.try_wait() {
                return Err(format!("chromedriver exited at start: {exit}"));
            }
            if let Ok(reply) = self.http.call(Method::GET, &status, None).await
                && reply.status().is_success()
                && serde_json::from_slice::<serde_json::Value>(reply.body())
                    .is_ok_and(|v| v["value"]["ready"] == true)
            {
                info!(chromedriver.pid = pid, %url, "chromedriver ready");
                return Ok(Running {
                    child,
                    pid,
                    url,
                    started: Instant::now(),
                });
            }
            if Instant::now() >= deadline {
                process::kill_group(pid).await;
                return Err(format!("not ready within {READY_TIMEOUT:?}"));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Kills the managed chromedriver (and anything left in its process group). The next
    /// [`ChromeDriver::url`] would start a new one.
    pub async fn stop(&self) {
        if let Some(mut old) = self.running.lock().await.take() {
            self.pid.store(0, Ordering::SeqCst);
            process::kill_group(old.pid).await;
            let _ = tokio::time::timeout(Duration::from_secs(5), old.child.wait()).await;
            info!(chromedriver.pid = old.pid, "chromedriver stopped");
        }
    }

    /// The pid of the managed chromedriver, if one was started (it may have died since).
    pub fn pid(&self) -> Option<u32> {
        Some(self.pid.load(Ordering::SeqCst)).filter(|&pid| pid != 0)
    }
}

/// A loopback port free right now.
pub(crate) fn free_port() -> std::io::Result<u16> {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0))?;
    Ok(listener.local_addr()?.port())
}
