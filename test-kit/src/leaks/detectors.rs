//! The public detectors, fetched from npm at test time (never committed): FingerprintJS
//! BotD and fpscanner, both MIT, pinned to the versions measured in BENCHMARKS.md.
//!
//! [`fetch`] runs `npm pack` once into a cache directory and unpacks each tarball there;
//! the leak pages then serve each detector with a page that publishes its verdict as a
//! probe does (`window.__leakProbe`). Without npm or the registry, [`fetch`] fails; tests
//! skip then, except under `CI=true`, where a missing detector fails the test.

use std::path::{Path, PathBuf};

/// The npm packages, pinned.
pub const PACKAGES: &[(&str, &str)] = &[
    ("botd", "@fingerprintjs/botd@2.0.0"),
    ("fpscanner", "fpscanner@1.0.2"),
];

/// The detectors' ES modules.
#[derive(Debug, Clone)]
pub struct Detectors {
    /// BotD's `dist/botd.esm.js`.
    pub botd: String,
    /// fpscanner's `dist/fpScanner.es.js`.
    pub fpscanner: String,
}

/// The page that runs BotD (`load()`, `detect()`): leaked when it says `bot`.
pub const BOTD_PAGE: &str = r#"<!doctype html><html lang="ko"><head><meta charset="utf-8"><title>botd</title></head><body><p>검사</p>
<script type="module">
import { load } from '/detector/botd.js';
load().then(b => b.detect()).then(r => { window.__leakProbe = { leaked: !!r.bot, seen: JSON.stringify(r) }; },
  e => { window.__leakProbe = { leaked: true, seen: 'error: ' + e }; });
</script></body></html>"#;

/// The page that runs fpscanner: leaked when `fastBotDetectionDetails` flags a signal.
pub const FPSCANNER_PAGE: &str = r#"<!doctype html><html lang="ko"><head><meta charset="utf-8"><title>fpscanner</title></head><body><p>검사</p>
<script type="module">
import FingerprintScanner from '/detector/fpscanner.js';
new FingerprintScanner().collectFingerprint({ encrypt: false }).then(fp => {
  const d = fp.fastBotDetectionDetails || {};
  const flagged = Object.keys(d).filter(k => d[k] && d[k].detected);
  window.__leakProbe = { leaked: flagged.length > 0, seen: flagged.join(', ') || 'none' };
}, e => { window.__leakProbe = { leaked: true, seen: 'error: ' + e }; });
</script></body></html>"#;

/// Whether a missing detector must fail rather than skip (`CI=true`).
pub fn required() -> bool {
    crate::checks::in_ci()
}

/// The detectors, fetched into `cache` (once) with `npm pack`.
///
/// # Errors
/// npm cannot be run, the registry does not answer, or a tarball lacks its module.
pub fn fetch(cache: &Path) -> Result<Detectors, String> {
    std::fs::create_dir_all(cache).map_err(|e| format!("{}: {e}", cache.display()))?;
    let module = |name: &str| -> Result<PathBuf, String> {
        let file = match name {
            "botd" => "dist/botd.esm.js",
            _ => "dist/fpScanner.es.js",
        };
        Ok(cache.join(name).join("package").join(file))
    };
    for (name, spec) in PACKAGES {
        if module(name)?.exists() {
            continue;
        }
        let out = std::process::Command::new("npm")
            .args(["pack", spec, "--silent", "--pack-destination"])
            .arg(cache)
            .output()
            .map_err(|e| format!("npm pack {spec}: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "npm pack {spec}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        let tarball = String::from_utf8_lossy(&out.stdout)
            .lines()
            .last()
            .unwrap_or_default()
            .trim()
            .to_owned();
        let dir = cache.join(name);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let status = std::process::Command::new("tar")
            .arg("xzf")
            .arg(cache.join(&tarball))
            .arg("-C")
            .arg(&dir)
            .status()
            .map_err(|e| format!("tar {tarball}: {e}"))?;
        if !status.success() {
            return Err(format!("tar {tarball}: {status}"));
        }
    }
    let read = |name: &str| {
        let path = module(name)?;
        std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))
    };
    Ok(Detectors {
        botd: read("botd")?,
        fpscanner: read("fpscanner")?,
    })
}
