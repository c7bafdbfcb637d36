//! The WebDriver server: a chromedriver the node starts and supervises itself
//! (`LPS_CHROMEDRIVER_PATH`, on a free loopback port), or a given `LPS_WEBDRIVER_URL`.
//!
//! Owns the chromedriver child process. Invariants:
//! - [`ChromeDriver::url`] returns the URL of a server that answered `/status` ready; a
//!   managed chromedriver that has died is started again (on a new port) by the next call,
//!   so one crash costs the WebDriver sessions it held, not the node. [`ChromeDriver::check`] does
//!   the same without a job: the browser executor calls it every second once the
//!   chromedriver was first needed, so a dead one is replaced before the next job comes.
//! - [`ChromeDriver::is_up`] is false from the moment a managed chromedriver is seen dead
//!   (or fails to start) until one is running again (`/readyz`, `lps_node_chromedriver_up`);
//!   before the first start and after [`ChromeDriver::stop`] it is true (nothing is down,
//!   the server starts on demand). Every start after a death or a failed start counts in
//!   `lps_node_chromedriver_restarts_total`.
//! - The child runs in its own process group; [`ChromeDriver::stop`] kills that group, and
//!   `kill_on_drop` covers a node that never called `stop`.
//! - A managed chromedriver is a private copy without the `cdc_…` page globals detectors
//!   look for and without `Runtime.enable`, which made it an observable DevTools client
//!   ([`super::identity::patched_chromedriver`]), runs with
//!   `TZ=Asia/Seoul` (inherited by every Chromium it starts) and, in headful mode, with the
//!   `DISPLAY` of the node's Xvfb ([`Display`]), which is (re)started before it.
//!
//! Cancellation: `url` holds an async mutex while it starts the server; dropping the call
//! mid-start kills the half-started child (kill-on-drop) and the next call starts afresh.

use std::{
    path::PathBuf,
    process::Stdio,
    sync::{
        Arc,
        atomic::{AtomicU8, AtomicU32, Ordering},
    },
    time::Duration,
};

use hyper::{Method, Uri};
use tokio::{process::Child, sync::Mutex, time::Instant};
use tracing::{info, instrument, warn};

use super::{
    BrowserError,
    display::Display,
    http::WebDriverHttp,
    identity::{TIMEZONE, patched_chromedriver},
    process,
};
use crate::metrics::NodeMetrics;

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
    /// A [`State`], readable without the async lock.
    state: AtomicU8,
    http: WebDriverHttp,
    metrics: Arc<NodeMetrics>,
    /// Headful mode: the X display Chromium draws on.
    display: Option<Arc<Display>>,
}

/// Whether the managed chromedriver is running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum State {
    /// Not started yet, or stopped: it starts when needed.
    Idle = 0,
    Up = 1,
    /// Seen dead, or it failed to start; not running until a start succeeds.
    Down = 2,
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
    /// The chromedriver's process group, watched so it dies with the node.
    group: process::WatchedGroup,
}

impl Running {
    async fn kill(&self) {
        self.group.kill().await;
    }
}

impl ChromeDriver {
    /// A chromedriver the node starts from `path` when first needed.
    pub fn managed(path: impl Into<PathBuf>) -> Self {
        Self {
            mode: Mode::Managed { path: path.into() },
            running: Mutex::new(None),
            pid: AtomicU32::new(0),
            state: AtomicU8::new(State::Idle as u8),
            http: WebDriverHttp::new(Duration::from_secs(5)),
            metrics: Arc::new(NodeMetrics::new()),
            display: None,
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
            state: AtomicU8::new(State::Idle as u8),
            http: WebDriverHttp::new(Duration::from_secs(5)),
            metrics: Arc::new(NodeMetrics::new()),
            display: None,
        }
    }

    /// Headful mode: start Chromium on `display` (an Xvfb the node supervises).
    #[must_use]
    pub fn with_display(mut self, display: Arc<Display>) -> Self {
        self.display = Some(display);
        self
    }

    /// The X display, in headful mode.
    pub fn display(&self) -> Option<&Arc<Display>> {
        self.display.as_ref()
    }

    /// Records restarts and the up/down state into `metrics`.
    pub fn set_metrics(&mut self, metrics: Arc<NodeMetrics>) {
        metrics.chromedriver_up.set(i64::from(self.is_up()));
        self.metrics = metrics;
    }

    fn state(&self) -> State {
        match self.state.load(Ordering::SeqCst) {
            1 => State::Up,
            2 => State::Down,
            _ => State::Idle,
        }
    }

    fn set_state(&self, state: State) {
        self.state.store(state as u8, Ordering::SeqCst);
        self.metrics
            .chromedriver_up
            .set(i64::from(state != State::Down));
    }

    /// False while a managed chromedriver is down (seen dead or failed to start, and not
    /// running again yet); see the module docs. Always true for an external server.
    pub fn is_up(&self) -> bool {
        self.state() != State::Down
    }

    /// Starts a managed chromedriver again if it died or failed to start since it was
    /// first needed; nothing before the first [`ChromeDriver::url`], after
    /// [`ChromeDriver::stop`], or for an external server. Errors like `url`.
    pub async fn check(&self) -> Result<(), BrowserError> {
        match (&self.mode, self.state()) {
            (Mode::External { .. }, _) | (Mode::Managed { .. }, State::Idle) => Ok(()),
            (Mode::Managed { .. }, State::Up | State::Down) => self.url().await.map(drop),
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
            self.set_state(State::Down);
            self.pid.store(0, Ordering::SeqCst);
            if let Some(old) = running.take() {
                old.kill().await;
            }
        }
        let restart = self.state() == State::Down;
        let mut last = String::new();
        for attempt in 1..=START_ATTEMPTS {
            match self.start(path).await {
                Ok(started) => {
                    let url = started.url.clone();
                    self.pid.store(started.pid, Ordering::SeqCst);
                    *running = Some(started);
                    self.set_state(State::Up);
                    if restart {
                        self.metrics.chromedriver_restarts.inc();
                        info!("chromedriver restarted");
                    }
                    return Ok(url);
                }
                Err(err) => {
                    warn!(attempt, error = %err, "chromedriver did not start");
                    last = err;
                }
            }
        }
        self.set_state(State::Down);
        Err(BrowserError::Driver(last))
    }

    #[instrument(name = "browser.chromedriver_start", skip_all, fields(path = %path.display()))]
    async fn start(&self, path: &std::path::Path) -> Result<Running, String> {
        let port = free_port().map_err(|e| format!("no free loopback port: {e}"))?;
        let copies = std::env::temp_dir().join("lps-chromedriver");
        let binary = match patched_chromedriver(path, &copies) {
            Ok(binary) => binary,
            Err(e) => {
                warn!(error = %e, "cannot make the private chromedriver copy; using the original");
                path.to_path_buf()
            }
        };
        let mut cmd = tokio::process::Command::new(&binary);
        cmd.env("TZ", TIMEZONE);
        if let Some(display) = &self.display {
            let name = display.ensure().await.map_err(|e| e.to_string())?;
            cmd.env("DISPLAY", name);
        }
        cmd.arg(format!("--port={port}"))
            .arg("--allowed-ips=127.0.0.1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .process_group(0);
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", binary.display()))?;
        let pid = child.id().unwrap_or_default();
        let group = process::WatchedGroup::watch(pid, "chromedriver");
        let url = format!("http://127.0.0.1:{port}");
        let status: Uri = format!("{url}/status")
            .parse()
            .map_err(|e| format!("bad status URL: {e}"))?;
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Ok(Some(exit)) = child.try_wait() {
                group.forget().await;
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
                    group,
                });
            }
            if Instant::now() >= deadline {
                group.kill().await;
                return Err(format!("not ready within {READY_TIMEOUT:?}"));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Kills the managed chromedriver (and anything left in its process group). The next
    /// [`ChromeDriver::url`] would start a new one.
    pub async fn stop(&self) {
        let mut running = self.running.lock().await;
        self.set_state(State::Idle);
        if let Some(mut old) = running.take() {
            self.pid.store(0, Ordering::SeqCst);
            old.kill().await;
            let _ = tokio::time::timeout(Duration::from_secs(5), old.child.wait()).await;
            info!(chromedriver.pid = old.pid, "chromedriver stopped");
        }
    }

    /// The pid of the managed chromedriver, if one runs (it may have died since the last
    /// look).
    pub fn pid(&self) -> Option<u32> {
        Some(self.pid.load(Ordering::SeqCst)).filter(|&pid| pid != 0)
    }
}

/// A loopback port free right now.
pub(crate) fn free_port() -> std::io::Result<u16> {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0))?;
    Ok(listener.local_addr()?.port())
}
