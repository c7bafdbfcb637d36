//! The browser's identity: one consistent person's Chromium on Linux in Seoul, the same on
//! every surface a page can read (DESIGN §5 "Browser identity").
//!
//! | surface | how it is set |
//! |---|---|
//! | `User-Agent`, `navigator.userAgent` (page, iframes, workers) | `--user-agent`: the real Chromium major, no `Headless` |
//! | `Sec-CH-UA*`, `navigator.userAgentData` | CDP `Network.setUserAgentOverride` with user-agent metadata (brands, full version, platform) |
//! | `Accept-Language`, `navigator.languages` | `--lang`, `--accept-lang` and the override's `acceptLanguage`: ko-KR, ko, en-US, en |
//! | timezone | `TZ=Asia/Seoul` in the environment of chromedriver (inherited by Chromium, so workers too) and CDP `Emulation.setTimezoneOverride` |
//! | `navigator.webdriver` | `--disable-blink-features=AutomationControlled`: false natively in pages, frames and workers, nothing patched |
//! | chromedriver's `cdc_…` globals | a private copy of chromedriver with those names changed ([`patched_chromedriver`]), and its document-start script removed at launch |
//! | a DevTools client (`Runtime.enable` side effects) | the copy never sends `Runtime.enable`; the node's scripts run through CDP `Runtime.evaluate` |
//! | `enable-automation` switch, automation extension | `excludeSwitches`, `useAutomationExtension: false` |
//! | screen | `--screen-info` (headless) or the Xvfb screen (headful): 1920×1080 around a 1366×900 window |
//! | WebGL vendor/renderer | a document-start script ([`STEALTH_JS`]) answers a common Intel/Mesa pair instead of SwiftShader, with native-looking functions; workers and out-of-process frames get it before they run ([`super::contexts`]) |
//! | client hints in shared and service workers | the same override, sent to each worker target ([`super::contexts`]) |
//! | `outerWidth`/`outerHeight` | the same script answers the known window size while a new renderer still reads 0x0 (a Chromium race at navigation) |
//!
//! Everything is applied before the first page: flags at launch, CDP commands and the
//! document-start script right after the WebDriver session starts, so every document of the
//! browser gets them. What cannot be set natively is patched by [`STEALTH_JS`] with functions whose
//! `toString` reads `[native code]`.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    sync::{LazyLock, Mutex},
};

use serde_json::{Value, json};
use tracing::warn;

/// The languages the browser speaks, in order.
pub const LANGUAGES: &[&str] = &["ko-KR", "ko", "en-US", "en"];
/// The browser's timezone.
pub const TIMEZONE: &str = "Asia/Seoul";
/// The window (outer) size.
pub const WINDOW: (u32, u32) = (1366, 900);
/// The screen size.
pub const SCREEN: (u32, u32) = (1920, 1080);
/// `navigator.platform`.
pub const PLATFORM: &str = "Linux x86_64";
/// The WebGL vendor and renderer pages read (`UNMASKED_*_WEBGL`).
pub const WEBGL: (&str, &str) = (
    "Google Inc. (Intel)",
    "ANGLE (Intel, Mesa Intel(R) UHD Graphics 620 (KBL GT2), OpenGL 4.6)",
);

/// How Chromium shows itself: without a display, or in a real window under Xvfb.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum BrowserMode {
    #[default]
    Headless,
    Headful,
}

impl BrowserMode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Headless => "headless",
            Self::Headful => "headful",
        }
    }
}

/// One browser identity (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// Chromium's full version (`156.0.8078.114`).
    pub full_version: String,
    /// Its major version (`156`).
    pub major: String,
}

static VERSIONS: LazyLock<Mutex<HashMap<PathBuf, Option<String>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

impl Identity {
    /// The identity of the Chromium at `path` (its `--version`, asked once per process).
    /// `None` when the version cannot be read: the browser then keeps its own user agent
    /// string and the self-check reports what leaks.
    pub fn of(chromium: &Path) -> Option<Self> {
        let mut versions = VERSIONS.lock().unwrap_or_else(|e| e.into_inner());
        let version = versions
            .entry(chromium.to_path_buf())
            .or_insert_with(|| read_version(chromium))
            .clone()?;
        Some(Self::from_version(&version))
    }

    /// The identity of a Chromium of `full_version`.
    pub fn from_version(full_version: &str) -> Self {
        let major = full_version
            .split('.')
            .next()
            .unwrap_or(full_version)
            .to_owned();
        Self {
            full_version: full_version.to_owned(),
            major,
        }
    }

    /// The user agent string: desktop Chrome on Linux, the real major, reduced minor
    /// version as Chrome sends it.
    pub fn user_agent(&self) -> String {
        format!(
            "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/{}.0.0.0 Safari/537.36",
            self.major
        )
    }

    /// The brands of `navigator.userAgentData` and `Sec-CH-UA`, as Chrome lists them.
    pub fn brands(&self, full: bool) -> Value {
        let v = |version: &str| {
            if full {
                version.to_owned()
            } else {
                version.split('.').next().unwrap_or(version).to_owned()
            }
        };
        json!([
            { "brand": "Not)A;Brand", "version": v("8.0.0.0") },
            { "brand": "Chromium", "version": v(&self.full_version) },
            { "brand": "Google Chrome", "version": v(&self.full_version) },
        ])
    }

    /// Parameters of CDP `Network.setUserAgentOverride`.
    pub fn user_agent_override(&self) -> Value {
        json!({
            "userAgent": self.user_agent(),
            "acceptLanguage": LANGUAGES.join(","),
            "platform": PLATFORM,
            "userAgentMetadata": {
                "brands": self.brands(false),
                "fullVersionList": self.brands(true),
                "fullVersion": self.full_version,
                "platform": "Linux",
                "platformVersion": "",
                "architecture": "x86",
                "model": "",
                "mobile": false,
                "bitness": "64",
                "wow64": false,
            },
        })
    }
}

/// Chromium flags of the identity and the mode (after the quiet flags).
pub fn flags(identity: Option<&Identity>, mode: BrowserMode) -> Vec<String> {
    let mut flags = vec![
        "--disable-blink-features=AutomationControlled".to_owned(),
        "--lang=ko-KR".to_owned(),
        format!("--accept-lang={}", LANGUAGES.join(",")),
        format!("--window-size={},{}", WINDOW.0, WINDOW.1),
    ];
    match mode {
        BrowserMode::Headless => {
            flags.push("--headless=new".to_owned());
            flags.push(format!("--screen-info={{{}x{}}}", SCREEN.0, SCREEN.1));
        }
        BrowserMode::Headful => {
            flags.push("--window-position=0,0".to_owned());
            // NB: no GPU under Xvfb; without this WebGL has no context at all, itself a tell.
            flags.push("--enable-unsafe-swiftshader".to_owned());
        }
    }
    if let Some(identity) = identity {
        flags.push(format!("--user-agent={}", identity.user_agent()));
    }
    flags
}

fn read_version(chromium: &Path) -> Option<String> {
    let out = std::process::Command::new(chromium)
        .arg("--version")
        .output();
    let text = match out {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).into_owned(),
        Ok(out) => {
            warn!(status = %out.status, "chromium --version failed; the browser keeps its own user agent");
            return None;
        }
        Err(e) => {
            warn!(error = %e, "cannot run chromium --version; the browser keeps its own user agent");
            return None;
        }
    };
    parse_version(&text)
}

/// The version in `Chromium 156.0.8078.114 built on Debian …`.
fn parse_version(text: &str) -> Option<String> {
    text.split_whitespace()
        .find(|w| {
            w.split('.').count() >= 3
                && w.split('.')
                    .all(|p| p.chars().all(|c| c.is_ascii_digit()) && !p.is_empty())
        })
        .map(str::to_owned)
}

/// The prefix of chromedriver's page globals (`cdc_…_Array`), which detectors look for.
const CDC_PREFIX: &[u8] = b"cdc_adoQpoasnfa76pfcZLmcfl_";

/// The CDP command that makes chromedriver an observable DevTools client, and the harmless
/// command of the same length put in its place (chromedriver already enables `Network`).
///
/// NB: with the `Runtime` domain enabled by any client, V8 serialises every `console.*`
/// argument for it: logging an `Error` reads its `stack`, which runs a page-planted
/// `Error.prepareStackTrace` — a page sees that a DevTools client listens (fpscanner's
/// `hasCDP`). Chromium 156's chromedriver enables it twice on every page target; without
/// it chromedriver cannot run WebDriver scripts (it finds no execution context), so the
/// node runs its scripts through CDP `Runtime.evaluate` instead ([`super::Browser::script`]).
const RUNTIME_ENABLE: &[u8; 14] = b"Runtime.enable";
const RUNTIME_ENABLE_STANDIN: &[u8; 14] = b"Network.enable";

/// How the private copy differs from the original; part of the copy's name, so a copy made
/// by an older node (with fewer changes) is never reused.
const COPY_SCHEME: &str = "v2";

/// A private copy of the chromedriver at `original`, in `dir`, made once per chromedriver
/// build (named by its size and modification time) and reused, with:
/// - its `cdc_…` global names replaced by another identifier of the same length;
/// - its `Runtime.enable` commands replaced by `Network.enable` (`RUNTIME_ENABLE`).
///
/// Every change keeps the binary's length and layout. A chromedriver with neither is used
/// as it is. What a change missed (another chromedriver build) the self-check still sees.
///
/// # Errors
/// The original cannot be read, or the copy cannot be written.
pub fn patched_chromedriver(original: &Path, dir: &Path) -> std::io::Result<PathBuf> {
    let meta = std::fs::metadata(original)?;
    let stamp = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs());
    let target = dir.join(format!("chromedriver-{COPY_SCHEME}-{}-{stamp}", meta.len()));
    if target.exists() {
        return Ok(target);
    }
    let bytes = std::fs::read(original)?;
    let mut patched = if contains(&bytes, CDC_PREFIX) {
        replace_all(&bytes, CDC_PREFIX, &replacement_prefix())
    } else {
        bytes.clone()
    };
    let runtime_sites = disable_runtime_enable(&mut patched);
    if runtime_sites == 0 {
        warn!(
            chromedriver = %original.display(),
            "no Runtime.enable command found in chromedriver; the self-check tells whether a DevTools client shows"
        );
    }
    if patched == bytes {
        return Ok(original.to_path_buf());
    }
    std::fs::create_dir_all(dir)?;
    let partial = dir.join(format!(".chromedriver-{}.partial", std::process::id()));
    std::fs::write(&partial, patched)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&partial, std::fs::Permissions::from_mode(0o755))?;
    }
    std::fs::rename(&partial, &target)?;
    Ok(target)
}

/// Replaces chromedriver's `Runtime.enable` commands by [`RUNTIME_ENABLE_STANDIN`] in
/// `binary`; returns how many places changed.
///
/// The name is in the binary in two forms: a NUL-terminated string, and — where the
/// compiler builds the 14-byte `std::string` in place — two overlapping 8-byte immediates,
/// `movabs r, "e.enable"` (bytes 6..14) then, a few instructions later, `movabs r,
/// "Runtime."` (bytes 0..8). Both immediates of one site change together.
fn disable_runtime_enable(binary: &mut [u8]) -> usize {
    let mut sites = 0;
    let mut nul_terminated = Vec::with_capacity(16);
    nul_terminated.push(0);
    nul_terminated.extend_from_slice(RUNTIME_ENABLE);
    nul_terminated.push(0);
    let mut i = 0;
    while let Some(at) = find(&binary[i..], &nul_terminated).map(|k| k + i) {
        binary[at + 1..at + 15].copy_from_slice(RUNTIME_ENABLE_STANDIN);
        sites += 1;
        i = at + 15;
    }
    let (head, tail) = (&RUNTIME_ENABLE[..8], &RUNTIME_ENABLE[6..]);
    let (new_head, new_tail) = (&RUNTIME_ENABLE_STANDIN[..8], &RUNTIME_ENABLE_STANDIN[6..]);
    let is_movabs = |b: &[u8], at: usize| {
        at >= 2 && matches!(b[at - 2], 0x48 | 0x49) && (0xb8..=0xbf).contains(&b[at - 1])
    };
    let mut i = 0;
    while let Some(at) = find(&binary[i..], tail).map(|k| k + i) {
        i = at + 8;
        if !is_movabs(binary, at) {
            continue;
        }
        // The head's store follows within a few instructions.
        let window = (at + 8)..(at + 48).min(binary.len());
        let Some(head_at) = find(&binary[window.clone()], head).map(|k| k + window.start) else {
            continue;
        };
        if !is_movabs(binary, head_at) {
            continue;
        }
        binary[at..at + 8].copy_from_slice(new_tail);
        binary[head_at..head_at + 8].copy_from_slice(new_head);
        sites += 1;
    }
    sites
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// An identifier as long as [`CDC_PREFIX`], random per copy, that no detector lists.
fn replacement_prefix() -> Vec<u8> {
    const LETTERS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    let mut out: Vec<u8> = (0..CDC_PREFIX.len() - 1)
        .map(|_| LETTERS[fastrand::usize(..LETTERS.len())])
        .collect();
    out.push(b'_');
    out
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

fn replace_all(haystack: &[u8], needle: &[u8], with: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(haystack.len());
    let mut i = 0;
    while i < haystack.len() {
        if haystack[i..].starts_with(needle) {
            out.extend_from_slice(with);
            i += needle.len();
        } else {
            out.push(haystack[i]);
            i += 1;
        }
    }
    out
}

/// Runs before any page script in every document and worker of the browser (`self` is the
/// window or the worker's global scope): the WebGL vendor and renderer (SwiftShader is software rendering, which no person's browser reports), and
/// the outer window's size while a new renderer has not received it yet (Chromium answers
/// 0x0 then), with patched functions that look native to `Function.prototype.toString`.
pub const STEALTH_JS: &str = r#"(function () {
  var VENDOR = %VENDOR%, RENDERER = %RENDERER%;
  var nativeToString = Function.prototype.toString;
  var disguised = new WeakMap();
  // NB: method shorthand: like a native function it has no `prototype`.
  var toString = ({ toString() {
    var shown = disguised.get(this);
    return shown !== undefined ? shown : nativeToString.call(this);
  } }).toString;
  disguised.set(toString, nativeToString.call(nativeToString));
  try { Object.defineProperty(Function.prototype, 'toString', { value: toString, writable: true, configurable: true, enumerable: false }); } catch (e) {}
  function patch(proto, name, make) {
    var original = proto && proto[name];
    if (typeof original !== 'function') { return; }
    var replaced = make(original);
    disguised.set(replaced, nativeToString.call(original));
    try { Object.defineProperty(replaced, 'name', { value: original.name }); } catch (e) {}
    try { Object.defineProperty(replaced, 'length', { value: original.length }); } catch (e) {}
    try { Object.defineProperty(proto, name, { value: replaced, writable: true, configurable: true, enumerable: false }); } catch (e) {}
  }
  // A page's first scripts can run before the window's metrics reach a new renderer:
  // Chromium then answers an outer window of 0x0, which no person's browser shows. The
  // window is never resized, so its size is known.
  [['outerWidth', %WIDTH%], ['outerHeight', %HEIGHT%]].forEach(function (pair) {
    var d = Object.getOwnPropertyDescriptor(self, pair[0]);
    if (!d || typeof d.get !== 'function') { return; }
    var nativeGet = d.get;
    var get = ({ get [pair[0]]() {
      var v = nativeGet.call(this);
      return v > 0 ? v : pair[1];
    } });
    var getter = Object.getOwnPropertyDescriptor(get, pair[0]).get;
    disguised.set(getter, nativeToString.call(nativeGet));
    try { Object.defineProperty(getter, 'name', { value: nativeGet.name }); } catch (e) {}
    try { Object.defineProperty(self, pair[0], { get: getter, set: d.set, configurable: d.configurable, enumerable: d.enumerable }); } catch (e) {}
  });
  [self.WebGLRenderingContext, self.WebGL2RenderingContext].forEach(function (ctx) {
    if (!ctx) { return; }
    patch(ctx.prototype, 'getParameter', function (original) {
      return ({ getParameter(p) {
        if (p === 37445) { return VENDOR; }
        if (p === 37446) { return RENDERER; }
        return original.apply(this, arguments);
      } }).getParameter;
    });
  });
})();"#;

/// [`STEALTH_JS`] with the identity's WebGL strings.
pub fn stealth_script() -> String {
    let quote = |s: &str| serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_owned());
    STEALTH_JS
        .replace("%VENDOR%", &quote(WEBGL.0))
        .replace("%RENDERER%", &quote(WEBGL.1))
        .replace("%WIDTH%", &WINDOW.0.to_string())
        .replace("%HEIGHT%", &WINDOW.1.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_identity_follows_the_real_version() {
        assert_eq!(
            parse_version("Chromium 156.0.8078.114 built on Debian GNU/Linux 12 (bookworm)\n")
                .as_deref(),
            Some("156.0.8078.114")
        );
        assert_eq!(parse_version("no version here"), None);
        let id = Identity::from_version("156.0.8078.114");
        assert_eq!(id.major, "156");
        let ua = id.user_agent();
        assert!(
            ua.contains("Chrome/156.0.0.0") && !ua.contains("Headless"),
            "{ua}"
        );
        let o = id.user_agent_override();
        assert_eq!(o["acceptLanguage"], "ko-KR,ko,en-US,en");
        assert_eq!(o["userAgentMetadata"]["brands"][2]["version"], "156");
        assert_eq!(
            o["userAgentMetadata"]["fullVersionList"][2]["version"],
            "156.0.8078.114"
        );
        let headless = flags(Some(&id), BrowserMode::Headless);
        assert!(headless.contains(&"--headless=new".to_owned()));
        assert!(
            !flags(Some(&id), BrowserMode::Headful)
                .iter()
                .any(|f| f.starts_with("--headless"))
        );
    }

    #[test]
    fn the_chromedriver_copy_never_enables_runtime() {
        // The two forms in chromedriver 156: a C string, and a 14-byte std::string built
        // in place by two overlapping `movabs` stores (bytes 6..14, then 0..8).
        let mut binary = Vec::new();
        binary.extend_from_slice(b"\0Log.enable\0Runtime.enable\0Page.enable\0");
        binary.extend_from_slice(
            b"\x48\xb8e.enable\x49\x89\x44\x24\x06\x48\xb8Runtime.\x49\x89\x04\x24",
        );
        // Not a Runtime.enable: `Runtime.evaluate` and a lone immediate stay as they are.
        binary.extend_from_slice(b"\x48\xb8Runtime.\x48\xb8evaluate \x48\xb8e.enable\x90\x90");
        let before = binary.clone();
        assert_eq!(disable_runtime_enable(&mut binary), 2);
        assert_eq!(binary.len(), before.len());
        assert!(!contains(&binary, b"Runtime.enable"));
        assert!(contains(&binary, b"\0Network.enable\0Page.enable\0"));
        assert!(contains(
            &binary,
            b"\x48\xb8k.enable\x49\x89\x44\x24\x06\x48\xb8Network."
        ));
        assert!(contains(
            &binary,
            b"\x48\xb8Runtime.\x48\xb8evaluate \x48\xb8e.enable\x90\x90"
        ));
    }

    #[test]
    fn the_chromedriver_copy_has_no_cdc_names() {
        let dir = std::env::temp_dir().join(format!("lps-cdc-{}", fastrand::u64(..)));
        std::fs::create_dir_all(&dir).unwrap();
        let original = dir.join("chromedriver");
        std::fs::write(
            &original,
            b"head cdc_adoQpoasnfa76pfcZLmcfl_Array mid cdc_adoQpoasnfa76pfcZLmcfl_JSON",
        )
        .unwrap();
        let copy = patched_chromedriver(&original, &dir.join("out")).unwrap();
        let bytes = std::fs::read(&copy).unwrap();
        assert!(
            !contains(&bytes, b"cdc_"),
            "{}",
            String::from_utf8_lossy(&bytes)
        );
        assert_eq!(
            bytes.len(),
            std::fs::metadata(&original).unwrap().len() as usize
        );
        assert!(bytes.ends_with(b"_JSON"));
        // Made once: the second call returns the same file.
        assert_eq!(
            patched_chromedriver(&original, &dir.join("out")).unwrap(),
            copy
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
