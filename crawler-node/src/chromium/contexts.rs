//! One identity in every context (DESIGN §5 "Browser identity"): the node's own DevTools
//! connection to its Chromium gives every worker (dedicated, shared, service) and every
//! out-of-process frame the page's identity before their first script runs.
//!
//! chromedriver's CDP commands reach the page's own target only: a worker or a cross-site
//! frame is another target, which would show the real WebGL renderer and — shared and
//! service workers — Chromium's own client-hint brands. So, on the browser's DevTools
//! WebSocket (`goog:chromeOptions.debuggerAddress`), [`Contexts`] auto-attaches to every
//! target with `waitForDebuggerOnStart` and, for each new one, before letting it run
//! (`Runtime.runIfWaitingForDebugger`):
//! - workers: the user-agent override with its metadata (`Network.setUserAgentOverride`)
//!   and the identity script ([`identity::stealth_script`]) by `Runtime.evaluate`;
//! - frames (out of process) and pages: the same override, the timezone, the identity
//!   script as a document-start script, and auto-attach for their own workers and frames.
//!
//! Never `Runtime.enable` (a page would see the client: see `identity::RUNTIME_ENABLE`).
//! The connection is a minimal RFC 6455 client (text frames, client masking, no
//! extensions) on loopback; its task ends when the WebSocket closes (the browser quit) or
//! the [`Contexts`] is dropped. Answers to its commands are not awaited: commands on one
//! session run in order, and a failed one (a target gone meanwhile) is logged at debug.

use std::collections::HashMap;

use serde_json::{Value, json};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};
use tracing::{Instrument, debug, info_span, warn};

use super::{
    BrowserError,
    identity::{self, Identity},
};

/// Connecting to the browser's DevTools endpoint takes at most this.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The node's DevTools connection to one browser; dropping it ends the connection.
#[derive(Debug)]
pub struct Contexts {
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Contexts {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Contexts {
    /// Connects to the browser at `debugger_address` (`host:port`) and starts attaching.
    /// Returns once auto-attach is asked for, so targets created afterwards get the identity.
    ///
    /// # Errors
    /// The DevTools endpoint cannot be reached or refuses the WebSocket.
    pub async fn start(
        debugger_address: &str,
        identity: Option<&Identity>,
    ) -> Result<Self, BrowserError> {
        let launch = |e: String| BrowserError::Launch(format!("devtools {debugger_address}: {e}"));
        let connect = async {
            let url = browser_ws_url(debugger_address).await?;
            WebSocket::connect(debugger_address, &url).await
        };
        let mut ws = match tokio::time::timeout(CONNECT_TIMEOUT, connect).await {
            Ok(ws) => ws.map_err(launch)?,
            Err(_) => {
                return Err(BrowserError::Timeout {
                    what: "devtools connect",
                    after: CONNECT_TIMEOUT,
                });
            }
        };
        let mut attacher = Attacher {
            next_id: 1,
            ua_override: identity.map(Identity::user_agent_override),
            script: identity::stealth_script(),
            sessions: HashMap::new(),
        };
        let first = attacher.command(None, "Target.setAutoAttach", auto_attach());
        ws.send(&first).await.map_err(launch)?;
        let task = tokio::spawn(
            async move {
                loop {
                    let text = match ws.recv().await {
                        Ok(Some(text)) => text,
                        Ok(None) => break,
                        Err(e) => {
                            debug!(error = %e, "devtools connection ended");
                            break;
                        }
                    };
                    let Ok(message) = serde_json::from_str::<Value>(&text) else {
                        continue;
                    };
                    for out in attacher.on_message(&message) {
                        if let Err(e) = ws.send(&out).await {
                            debug!(error = %e, "devtools connection ended");
                            return;
                        }
                    }
                }
            }
            // A root span that follows from the launch: the connection lives as long as
            // the browser, and a child would hold the launch (and the job above it) open,
            // so neither would be exported while the node runs.
            .instrument({
                let span = info_span!(parent: None, "browser.contexts");
                span.follows_from(tracing::Span::current());
                span
            }),
        );
        Ok(Self { task })
    }
}

fn auto_attach() -> Value {
    json!({ "autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true })
}

/// The state of the connection: which session is which target kind, what to send.
struct Attacher {
    next_id: u64,
    ua_override: Option<Value>,
    script: String,
    /// Session id → target type.
    sessions: HashMap<String, String>,
}

impl Attacher {
    fn command(&mut self, session: Option<&str>, method: &str, params: Value) -> String {
        let id = self.next_id;
        self.next_id += 1;
        let mut message = json!({ "id": id, "method": method, "params": params });
        if let Some(session) = session {
            message["sessionId"] = Value::String(session.to_owned());
        }
        message.to_string()
    }

    /// What to send for one incoming message.
    fn on_message(&mut self, message: &Value) -> Vec<String> {
        if let Some(error) = message.get("error") {
            debug!(error = %error, session = ?message.get("sessionId"), "devtools command failed");
            return Vec::new();
        }
        match message.get("method").and_then(Value::as_str) {
            Some("Target.attachedToTarget") => self.attached(&message["params"]),
            Some("Target.detachedFromTarget") => {
                if let Some(s) = message.pointer("/params/sessionId").and_then(Value::as_str) {
                    self.sessions.remove(s);
                }
                Vec::new()
            }
            _ => Vec::new(),
        }
    }

    fn attached(&mut self, params: &Value) -> Vec<String> {
        let Some(session) = params.get("sessionId").and_then(Value::as_str) else {
            return Vec::new();
        };
        let kind = params
            .pointer("/targetInfo/type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let session = session.to_owned();
        let s = Some(session.as_str());
        let mut out = Vec::new();
        match kind.as_str() {
            "worker" | "shared_worker" | "service_worker" => {
                if let Some(ua) = self.ua_override.clone() {
                    out.push(self.command(s, "Network.setUserAgentOverride", ua));
                }
                let expression = self.script.clone();
                out.push(self.command(
                    s,
                    "Runtime.evaluate",
                    json!({ "expression": expression, "silent": true }),
                ));
            }
            "page" | "iframe" => {
                if let Some(ua) = self.ua_override.clone() {
                    out.push(self.command(s, "Network.setUserAgentOverride", ua));
                }
                out.push(self.command(
                    s,
                    "Emulation.setTimezoneOverride",
                    json!({ "timezoneId": identity::TIMEZONE }),
                ));
                // NB: chromedriver's page already has the script (instance.rs); a second
                // copy would wrap the patched functions twice, so only frames get it.
                if kind == "iframe" {
                    // NB: document-start scripts run only while the Page domain is enabled
                    // on the session (chromedriver enables it on its page); not observable.
                    out.push(self.command(s, "Page.enable", json!({})));
                    let source = self.script.clone();
                    out.push(self.command(
                        s,
                        "Page.addScriptToEvaluateOnNewDocument",
                        json!({ "source": source }),
                    ));
                }
                out.push(self.command(s, "Target.setAutoAttach", auto_attach()));
            }
            _ => {}
        }
        if params.get("waitingForDebugger") == Some(&Value::Bool(true)) {
            out.push(self.command(s, "Runtime.runIfWaitingForDebugger", json!({})));
        }
        debug!(session = %session, kind = %kind, "devtools target attached");
        self.sessions.insert(session, kind);
        out
    }
}

/// The browser-level WebSocket URL from `GET /json/version`.
///
/// NB: Chromium's DevTools server keeps the connection open after the answer: read the
/// head, then exactly `Content-Length` bytes.
async fn browser_ws_url(address: &str) -> Result<String, String> {
    let mut stream = TcpStream::connect(address)
        .await
        .map_err(|e| e.to_string())?;
    let request =
        format!("GET /json/version HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut answer = Vec::new();
    let mut chunk = [0u8; 4096];
    let body = loop {
        if let Some(end) = answer.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&answer[..end]).to_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok());
            if let Some(length) = length
                && answer.len() >= end + 4 + length
            {
                break answer[end + 4..end + 4 + length].to_vec();
            }
        }
        let n = stream.read(&mut chunk).await.map_err(|e| e.to_string())?;
        if n == 0 {
            let end = answer
                .windows(4)
                .position(|w| w == b"\r\n\r\n")
                .ok_or("/json/version: no answer")?;
            break answer[end + 4..].to_vec();
        }
        answer.extend_from_slice(&chunk[..n]);
    };
    let version: Value =
        serde_json::from_slice(&body).map_err(|e| format!("/json/version: {e}"))?;
    version
        .get("webSocketDebuggerUrl")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| "/json/version has no webSocketDebuggerUrl".to_owned())
}

/// A minimal WebSocket client (RFC 6455): text messages, masked client frames.
struct WebSocket {
    stream: TcpStream,
    buffer: Vec<u8>,
}

impl WebSocket {
    async fn connect(address: &str, url: &str) -> Result<Self, String> {
        let path = url
            .split_once("://")
            .and_then(|(_, rest)| rest.find('/').map(|i| &rest[i..]))
            .ok_or_else(|| format!("bad WebSocket URL {url}"))?;
        let mut stream = TcpStream::connect(address)
            .await
            .map_err(|e| e.to_string())?;
        let key = base64_key();
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: {address}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        );
        stream
            .write_all(request.as_bytes())
            .await
            .map_err(|e| e.to_string())?;
        let mut buffer = Vec::new();
        let mut chunk = [0u8; 4096];
        let end = loop {
            if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                break end + 4;
            }
            let n = stream.read(&mut chunk).await.map_err(|e| e.to_string())?;
            if n == 0 {
                return Err("closed during the WebSocket handshake".to_owned());
            }
            buffer.extend_from_slice(&chunk[..n]);
        };
        let head = String::from_utf8_lossy(&buffer[..end]).into_owned();
        if !head.starts_with("HTTP/1.1 101") {
            return Err(format!(
                "WebSocket refused: {}",
                head.lines().next().unwrap_or_default()
            ));
        }
        buffer.drain(..end);
        Ok(Self { stream, buffer })
    }

    async fn send(&mut self, text: &str) -> Result<(), String> {
        let frame = encode_frame(0x1, text.as_bytes(), fastrand::u32(..).to_be_bytes());
        self.stream
            .write_all(&frame)
            .await
            .map_err(|e| e.to_string())
    }

    /// The next text message; `None` when the server closed.
    async fn recv(&mut self) -> Result<Option<String>, String> {
        let mut message = Vec::new();
        loop {
            let (fin, opcode, payload) = loop {
                if let Some((frame, used)) = decode_frame(&self.buffer)? {
                    self.buffer.drain(..used);
                    break frame;
                }
                self.buffer.reserve(16 * 1024);
                let n = self
                    .stream
                    .read_buf(&mut self.buffer)
                    .await
                    .map_err(|e| e.to_string())?;
                if n == 0 {
                    return Ok(None);
                }
            };
            match opcode {
                0x8 => return Ok(None),
                0x9 => {
                    let pong = encode_frame(0xA, &payload, fastrand::u32(..).to_be_bytes());
                    self.stream
                        .write_all(&pong)
                        .await
                        .map_err(|e| e.to_string())?;
                }
                0xA => {}
                _ => {
                    message.extend_from_slice(&payload);
                    if fin {
                        return Ok(Some(String::from_utf8_lossy(&message).into_owned()));
                    }
                }
            }
        }
    }
}

fn base64_key() -> String {
    use base64::Engine as _;
    let key: [u8; 16] = std::array::from_fn(|_| fastrand::u8(..));
    base64::engine::general_purpose::STANDARD.encode(key)
}

/// One client frame: FIN, `opcode`, masked with `mask`.
fn encode_frame(opcode: u8, payload: &[u8], mask: [u8; 4]) -> Vec<u8> {
    let mut frame = Vec::with_capacity(payload.len() + 14);
    frame.push(0x80 | opcode);
    match payload.len() {
        n if n < 126 => frame.push(0x80 | n as u8),
        n if n <= usize::from(u16::MAX) => {
            frame.push(0x80 | 126);
            frame.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            frame.push(0x80 | 127);
            frame.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    frame.extend_from_slice(&mask);
    frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    frame
}

type Frame = (bool, u8, Vec<u8>);

/// A whole frame at the start of `buf` and the bytes it used; `None` if incomplete.
fn decode_frame(buf: &[u8]) -> Result<Option<(Frame, usize)>, String> {
    if buf.len() < 2 {
        return Ok(None);
    }
    let fin = buf[0] & 0x80 != 0;
    let opcode = buf[0] & 0x0f;
    let masked = buf[1] & 0x80 != 0;
    let (len, mut at) = match buf[1] & 0x7f {
        126 if buf.len() >= 4 => (usize::from(u16::from_be_bytes([buf[2], buf[3]])), 4),
        127 if buf.len() >= 10 => {
            let mut b = [0u8; 8];
            b.copy_from_slice(&buf[2..10]);
            let len = usize::try_from(u64::from_be_bytes(b))
                .map_err(|_| "a frame too long".to_owned())?;
            (len, 10)
        }
        126 | 127 => return Ok(None),
        n => (usize::from(n), 2),
    };
    let mask = if masked {
        if buf.len() < at + 4 {
            return Ok(None);
        }
        let m = [buf[at], buf[at + 1], buf[at + 2], buf[at + 3]];
        at += 4;
        Some(m)
    } else {
        None
    };
    if buf.len() < at + len {
        return Ok(None);
    }
    let mut payload = buf[at..at + len].to_vec();
    if let Some(m) = mask {
        for (i, b) in payload.iter_mut().enumerate() {
            *b ^= m[i % 4];
        }
    }
    Ok(Some(((fin, opcode, payload), at + len)))
}

/// The debugger address chromedriver reports for its Chromium (`localhost:PORT`).
pub fn debugger_address(capabilities: &thirtyfour::Capabilities) -> Option<String> {
    let address = capabilities
        .get("goog:chromeOptions")?
        .get("debuggerAddress")?
        .as_str()?;
    if address.is_empty() {
        warn!("chromedriver reported an empty debuggerAddress");
        return None;
    }
    Some(address.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_in_all_three_length_forms() {
        for len in [0usize, 125, 126, 65535, 65536, 200_000] {
            let payload: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            let frame = encode_frame(0x1, &payload, [1, 2, 3, 4]);
            let ((fin, opcode, back), used) = decode_frame(&frame).unwrap().unwrap();
            assert!(fin);
            assert_eq!(opcode, 1);
            assert_eq!(used, frame.len());
            assert_eq!(back, payload, "length {len}");
            assert!(decode_frame(&frame[..frame.len() - 1]).unwrap().is_none());
        }
    }

    #[test]
    fn a_new_worker_gets_the_identity_before_it_runs() {
        let id = Identity::from_version("156.0.8078.114");
        let mut a = Attacher {
            next_id: 1,
            ua_override: Some(id.user_agent_override()),
            script: "/* identity */".to_owned(),
            sessions: HashMap::new(),
        };
        let out = a.on_message(&json!({
            "method": "Target.attachedToTarget",
            "params": { "sessionId": "S1", "targetInfo": { "type": "shared_worker" }, "waitingForDebugger": true },
        }));
        let methods: Vec<String> = out
            .iter()
            .map(|m| serde_json::from_str::<Value>(m).unwrap())
            .inspect(|m| assert_eq!(m["sessionId"], "S1"))
            .map(|m| m["method"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(
            methods,
            [
                "Network.setUserAgentOverride",
                "Runtime.evaluate",
                "Runtime.runIfWaitingForDebugger"
            ]
        );
        assert!(!out.iter().any(|m| m.contains("Runtime.enable")));
    }
}
