//! The wall page: small static HTML (no web font, no style-specific markup) whose only
//! job is to run [`WALL_SCRIPT`](super::WALL_SCRIPT).

use crate::catalog::MallStyle;
use crate::mall::markup::markup;
use crate::mall::wall::{WALL_SCRIPT, WALL_TEXT, WALL_VERDICT_PATH};

/// The wall page for one served wall. `nonce` is made of `[0-9a-z]` (the mall issues it).
pub(crate) fn wall_page(style: MallStyle, nonce: &str) -> String {
    format!(
        "<!DOCTYPE html><html lang=\"ko\"><head><meta charset=\"utf-8\"><title>{name}</title>\
         <meta name=\"robots\" content=\"noindex\">\
         <style>body{{font-family:sans-serif;text-align:center;padding-top:80px}}</style></head>\
         <body><div id=\"lps-wall\" class=\"lps-wall\" data-nonce=\"{nonce}\" data-verdict=\"{WALL_VERDICT_PATH}\">\
         <p class=\"lps-wall-title\">{WALL_TEXT}</p><p>안전한 쇼핑을 위해 잠시 확인합니다. 이 화면은 자동으로 넘어갑니다.</p>\
         <noscript><p>자바스크립트를 켜 주세요.</p></noscript></div>\
         <script>{WALL_SCRIPT}</script></body></html>\n",
        name = markup(style).mall_name,
    )
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::process::Command;

    use super::*;
    use crate::mall::markup::block_marker_html;
    use crate::mall::pages::FONT_PATH;
    use crate::mall::wall::CLIENT_SIGNALS;

    #[test]
    fn page_carries_nonce_path_and_script() {
        for style in MallStyle::ALL {
            let html = wall_page(style, "n0001");
            assert!(html.contains(
                r#"<div id="lps-wall" class="lps-wall" data-nonce="n0001" data-verdict="/_wall/verdict">"#
            ));
            assert!(html.contains(WALL_TEXT));
            assert!(!html.contains(FONT_PATH));
            assert!(!html.contains(&block_marker_html(style)));
        }
        assert_eq!(
            WALL_SCRIPT.matches("</").count(),
            0,
            "nothing can close the inline script"
        );
        for name in CLIENT_SIGNALS {
            let sync = format!("check('{name}',");
            let not_sync = format!("later('{name}',");
            assert!(
                WALL_SCRIPT.contains(&sync) || WALL_SCRIPT.contains(&not_sync),
                "the script reports {name}"
            );
        }
        let reported =
            WALL_SCRIPT.matches("check('").count() + WALL_SCRIPT.matches("later('").count();
        assert_eq!(reported, CLIENT_SIGNALS.len(), "and nothing else");
    }

    /// `node`, when on PATH (the script's syntax and behaviour are then checked); missing
    /// under CI, the test fails ([`crate::checks::tool`]).
    fn node() -> Option<PathBuf> {
        crate::checks::tool("node", "the wall script")
    }

    fn scratch(name: &str, text: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("lps-tk-wall-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("scratch dir");
        let path = dir.join(name);
        std::fs::write(&path, text).expect("write scratch file");
        path
    }

    /// Removes scratch files, and their directory once the last test has removed its own.
    fn remove_scratch(paths: &[&PathBuf]) {
        for path in paths {
            let _ = std::fs::remove_file(path);
        }
        if let Some(dir) = paths.first().and_then(|p| p.parent()) {
            // NB: fails while another test's files are still there, which is fine.
            let _ = std::fs::remove_dir(dir);
        }
    }

    #[test]
    fn script_is_valid_javascript() {
        let Some(node) = node() else {
            return;
        };
        let path = scratch("check.js", WALL_SCRIPT);
        let out = Command::new(node)
            .arg("--check")
            .arg(&path)
            .output()
            .expect("run node");
        remove_scratch(&[&path]);
        assert!(
            out.status.success(),
            "node --check: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Runs the script in node against a fake page (`HARNESS`) and returns the report
    /// it POSTed and whether it then reloaded.
    fn run_in_node(env: &str) -> Option<(serde_json::Value, bool)> {
        let node = node()?;
        let script = scratch(&format!("wall-{env}.js"), WALL_SCRIPT);
        let harness = scratch(&format!("harness-{env}.js"), HARNESS);
        let out = Command::new(node)
            .arg(&harness)
            .arg(&script)
            .arg(env)
            .env("TZ", "Asia/Seoul")
            .output()
            .expect("run node");
        remove_scratch(&[&script, &harness]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "harness {env}: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_str(stdout.trim()).expect("harness JSON");
        Some((v["report"].clone(), v["reloaded"] == true))
    }

    fn flagged(report: &serde_json::Value) -> Vec<String> {
        let signals = report["signals"].as_object().expect("signals");
        for name in CLIENT_SIGNALS {
            assert!(signals[*name].is_boolean(), "{name} reported: {report}");
        }
        assert_eq!(signals.len(), CLIENT_SIGNALS.len());
        signals
            .iter()
            .filter(|(_, v)| v.as_bool() == Some(true))
            .map(|(k, _)| k.clone())
            .collect()
    }

    #[test]
    fn script_flags_nothing_in_a_clean_korean_chrome() {
        let Some((report, reloaded)) = run_in_node("clean") else {
            return;
        };
        assert_eq!(report["nonce"], "n-test");
        assert_eq!(flagged(&report), Vec::<String>::new(), "{report}");
        assert!(reloaded, "reloads after the 200 answer");
        assert_eq!(report["details"]["timezone"], "Asia/Seoul -540");
    }

    #[test]
    fn script_flags_a_driven_browser_and_survives_missing_apis() {
        let Some((report, _)) = run_in_node("driven") else {
            return;
        };
        let flags = flagged(&report);
        for expected in [
            "webdriver",
            "driver_globals",
            "ua_headless",
            "uad_brands",
            "languages",
            "window_size",
            "no_plugins",
            "notification_permission",
            "iframe_webdriver",
            "cdp_runtime",
        ] {
            assert!(flags.iter().any(|f| f == expected), "{expected}: {flags:?}");
        }
        assert_eq!(
            report["details"]["driver_global"],
            "cdc_adoQpoasnfa76pfcZLmcfl_Array"
        );

        let Some((report, reloaded)) = run_in_node("bare") else {
            return;
        };
        let flags = flagged(&report);
        assert!(reloaded);
        for expected in [
            "languages",
            "window_size",
            "device_pixel_ratio",
            "hardware_concurrency",
            "no_plugins",
        ] {
            assert!(flags.iter().any(|f| f == expected), "{expected}: {flags:?}");
        }
        for absent_api in [
            "uad_brands",
            "notification_permission",
            "webgl_swiftshader",
            "no_cjk_font",
            "worker_webdriver",
            "cdp_runtime",
        ] {
            assert!(
                !flags.iter().any(|f| f == absent_api),
                "{absent_api} is not flagged without its API: {flags:?}"
            );
        }
    }

    /// A fake page for the script: `node harness.js wall.js clean|driven|bare`. Prints
    /// `{"report": <the POSTed JSON>, "reloaded": bool}`.
    const HARNESS: &str = r#"
'use strict';
const fs = require('fs');
const vm = require('vm');
const [, , scriptPath, env] = process.argv;
const out = { report: null, reloaded: false };
const nativeGetter = (v) => (function () { return v; }).bind(null);
const attrs = { 'data-nonce': 'n-test', 'data-verdict': '/_wall/verdict' };
const box = { getAttribute: (n) => (n in attrs ? attrs[n] : null), appendChild() {} };
const ctx = {
  setTimeout, clearTimeout,
  location: { reload() { out.reloaded = true; } },
  XMLHttpRequest: class {
    open(method, path) { this.path = path; }
    setRequestHeader() {}
    send(body) {
      out.report = JSON.parse(body);
      this.status = 200;
      setTimeout(() => this.onload && this.onload(), 0);
    }
  },
};
function element(tag, frameNavigator) {
  const e = { tagName: tag, style: {}, parentNode: null, getContext: () => null };
  if (tag === 'iframe') {
    Object.defineProperty(e, 'contentWindow', { get() { return { navigator: frameNavigator }; } });
  }
  return e;
}
function documentWith(frameNavigator, extra) {
  const body = {
    appendChild(child) { child.parentNode = body; setTimeout(() => child.onload && child.onload(), 0); },
    removeChild(child) { child.parentNode = null; },
  };
  return Object.assign({
    getElementById: (id) => (id === 'lps-wall' ? box : null),
    createElement: (tag) => element(tag, frameNavigator),
    documentElement: { getAttribute: () => null },
    body,
  }, extra || {});
}
const UA = 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36';
const HEADLESS_UA = 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/124.0.0.0 Safari/537.36';
function navigatorFor(ua, lang, webdriver, uadBrands, platform, uadPlatform, plugins) {
  function Navigator() {}
  Object.defineProperty(Navigator.prototype, 'webdriver', { get: nativeGetter(webdriver), configurable: true });
  const n = new Navigator();
  Object.assign(n, {
    userAgent: ua, platform, language: lang, languages: [lang, 'ko'], hardwareConcurrency: 8,
    plugins: { length: plugins }, mimeTypes: { length: plugins },
    userAgentData: { brands: uadBrands, platform: uadPlatform },
    permissions: { query: () => Promise.resolve({ state: 'prompt' }) },
  });
  return { Navigator, n };
}
let nav;
if (env === 'clean') {
  nav = navigatorFor(UA, 'ko-KR', false,
    [{ brand: 'Not-A.Brand', version: '99' }, { brand: 'Chromium', version: '124' }, { brand: 'Google Chrome', version: '124' }],
    'Win32', 'Windows', 5);
  Object.assign(ctx, {
    navigator: nav.n, Navigator: nav.Navigator, document: documentWith(nav.n),
    outerWidth: 1280, outerHeight: 800, screen: { width: 1920, height: 1080 }, devicePixelRatio: 1,
    chrome: {}, Notification: { permission: 'default' }, console: { debug() {} },
  });
} else if (env === 'driven') {
  nav = navigatorFor(HEADLESS_UA, 'en-US', true,
    [{ brand: 'HeadlessChrome', version: '124' }, { brand: 'Chromium', version: '124' }],
    'Linux x86_64', 'Linux', 0);
  Object.assign(ctx, {
    navigator: nav.n, Navigator: nav.Navigator, document: documentWith(nav.n),
    outerWidth: 1280, outerHeight: 800, screen: { width: 800, height: 600 }, devicePixelRatio: 1,
    chrome: {}, Notification: { permission: 'denied' },
    // A CDP Runtime client serializes console arguments (and so reads `stack`).
    console: { debug(e) { void e.stack; } },
    cdc_adoQpoasnfa76pfcZLmcfl_Array: Array,
  });
} else {
  // A browser with almost nothing: every check must still answer.
  Object.assign(ctx, {
    navigator: { userAgent: 'Mozilla/5.0 (compatible; Old/1.0)' },
    document: documentWith(undefined, { documentElement: undefined, body: undefined }),
  });
}
ctx.window = ctx;
vm.createContext(ctx);
vm.runInContext(fs.readFileSync(scriptPath, 'utf8'), ctx, { filename: 'wall.js' });
setTimeout(() => { process.stdout.write(JSON.stringify(out), () => process.exit(0)); }, 3000);
"#;
}
