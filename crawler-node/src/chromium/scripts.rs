//! The scripts the node runs inside result pages.
//!
//! - [`CAPTURE_JS`] is installed once per browser with CDP
//!   `Page.addScriptToEvaluateOnNewDocument`, so it runs on every document before the
//!   page's own scripts: it records the JSON bodies of the page's `fetch` and
//!   `XMLHttpRequest` responses (bounded in count and bytes) for `captured_json` card
//!   sources — WebDriver has no event stream to read them from — and the URL and status
//!   of every such response that failed (HTTP 400 or more), so a 429 on a request the page
//!   makes while it is scrolled is seen as the block it is.
//! - [`SNAPSHOT_JS`] is one look at the page: block markers, challenges, the no-results
//!   marker, the HTTP status, Chromium's error code, and the raw material of every card
//!   source (card elements' HTML, inline JSON, captured responses). Cards are read from it
//!   in Rust (`lps_profiles::extract`), so a poll is one WebDriver round trip.
//!
//! Texts are read with `innerText`, which leaves out `<script>` bodies: a mall's renderer
//! script often contains its own no-results text.

/// Records fetch/XHR JSON responses into a non-enumerable `window.__lpsCaptured`, and
/// failed ones (`{url, status}`) into `window.__lpsFailed`.
pub const CAPTURE_JS: &str = r#"(function () {
  if (window.__lpsCaptured) { return; }
  var store = [];
  var failed = [];
  var total = 0;
  var MAX_ENTRIES = 50, MAX_TOTAL = 6 * 1024 * 1024, MAX_ONE = 3 * 1024 * 1024;
  try {
    Object.defineProperty(window, '__lpsCaptured', { value: store, enumerable: false });
    Object.defineProperty(window, '__lpsFailed', { value: failed, enumerable: false });
  } catch (e) { return; }
  function fail(url, status) {
    if (status >= 400 && failed.length < MAX_ENTRIES) { failed.push({ url: String(url || ''), status: status }); }
  }
  function keep(url, text) {
    if (typeof text !== 'string' || !text) { return; }
    var head = text.replace(/^\s+/, '').charAt(0);
    if (head !== '{' && head !== '[') { return; }
    if (text.length > MAX_ONE || total + text.length > MAX_TOTAL || store.length >= MAX_ENTRIES) { return; }
    total += text.length;
    store.push({ url: String(url || ''), body: text });
  }
  // NB: the replacements must read as the builtins they replace (a detector compares
  // `Function.prototype.toString` output, own `toString`, `prototype`, `name`, `length`):
  // method shorthand has no `prototype`, and `toString` is layered over whatever it is now
  // (native, or the identity script's) with the replacements shown as the originals.
  var priorToString = Function.prototype.toString;
  var shown = new WeakMap();
  var layered = ({ toString() {
    var s = shown.get(this);
    return s !== undefined ? s : priorToString.call(this);
  } }).toString;
  shown.set(layered, priorToString.call(priorToString));
  function disguise(replaced, original) {
    shown.set(replaced, priorToString.call(original));
    try { Object.defineProperty(replaced, 'name', { value: original.name }); } catch (e) {}
    try { Object.defineProperty(replaced, 'length', { value: original.length }); } catch (e) {}
    return replaced;
  }
  try { Object.defineProperty(Function.prototype, 'toString', { value: layered, writable: true, configurable: true, enumerable: false }); } catch (e) {}
  var nativeFetch = window.fetch;
  if (typeof nativeFetch === 'function') {
    var fetch = disguise(({ fetch() {
      var answer = nativeFetch.apply(this, arguments);
      answer.then(function (r) {
        fail(r.url, r.status);
        try { r.clone().text().then(function (t) { keep(r.url, t); }, function () {}); } catch (e) {}
      }, function () {});
      return answer;
    } }).fetch, nativeFetch);
    try { Object.defineProperty(window, 'fetch', { value: fetch, writable: true, configurable: true, enumerable: true }); } catch (e) { window.fetch = fetch; }
  }
  if (window.XMLHttpRequest) {
    var urls = new WeakMap();
    var proto = XMLHttpRequest.prototype, open = proto.open, send = proto.send;
    var replaceMethod = function (name, replaced, original) {
      try { Object.defineProperty(proto, name, { value: disguise(replaced, original), writable: true, configurable: true, enumerable: true }); } catch (e) {}
    };
    replaceMethod('open', ({ open(method, url) { try { urls.set(this, url); } catch (e) {} return open.apply(this, arguments); } }).open, open);
    replaceMethod('send', ({ send() {
      var xhr = this;
      xhr.addEventListener('load', function () {
        try {
          var url = xhr.responseURL || urls.get(xhr);
          fail(url, xhr.status);
          if (xhr.responseType === '' || xhr.responseType === 'text') { keep(url, xhr.responseText); }
          else if (xhr.responseType === 'json' && xhr.response) { keep(url, JSON.stringify(xhr.response)); }
        } catch (e) {}
      });
      return send.apply(this, arguments);
    } }).send, send);
  }
})();"#;

/// One look at the page. Argument: see `page::SnapshotArgs`.
pub const SNAPSHOT_JS: &str = r#"
var p = arguments[0] || {};
var d = document;
function q(s, root) { if (!s) { return null; } try { return (root || d).querySelector(s); } catch (e) { return null; } }
function all(s) { if (!s) { return []; } try { return d.querySelectorAll(s); } catch (e) { return []; } }
var html = d.documentElement ? d.documentElement.outerHTML : '';
var bytes = html.length;
try { bytes = new TextEncoder().encode(html).length; } catch (e) {}
var body = d.body ? String(d.body.innerText || '') : '';
var nav = null;
try { nav = performance.getEntriesByType('navigation')[0] || null; } catch (e) {}
var out = { url: String(location.href), title: String(d.title || ''), html_bytes: bytes,
            status: (nav && nav.responseStatus) || 0, waited: !p.wait_for || !!q(p.wait_for),
            ready: d.readyState === 'complete',
            block: null, challenge: null, no_results: false, error_code: null, error_page: false,
            counts: [], captured_count: 0, failed: [], next_href: null, more_button: null,
            viewport: { width: window.innerWidth || 0, height: window.innerHeight || 0 },
            scroll: { y: window.scrollY || 0, height: (d.documentElement && d.documentElement.scrollHeight) || 0 },
            snapshot: { url: String(location.href), dom: [], scripts: [], captured: [] } };
out.error_page = (p.error_markers || []).some(function (s) { return !!q(s); });
if (out.error_page || String(location.href).indexOf('chrome-error://') === 0) {
  var shown = q(p.error_code_selector);
  var code = /ERR_[A-Z0-9_]+/.exec((shown && shown.textContent) || '') || /ERR_[A-Z0-9_]+/.exec(body || (d.documentElement ? d.documentElement.innerText : ''));
  out.error_code = code ? code[0] : null;
}
(p.block_texts || []).some(function (t) { if (t && body.indexOf(t) >= 0) { out.block = 'text:' + t; return true; } return false; });
if (!out.block) { (p.block_selectors || []).some(function (s) { if (q(s)) { out.block = 'selector:' + s; return true; } return false; }); }
if (!out.block && out.status && (p.block_statuses || []).indexOf(out.status) >= 0) { out.block = 'status:' + out.status; }
if (!out.block) {
  // NB: only a captcha a person is shown: healthy Naver pages carry a hidden, zero-size
  // ncaptcha frame.
  var frames = d.querySelectorAll('iframe');
  for (var i = 0; i < frames.length; i++) {
    var src = String(frames[i].getAttribute('src') || '').toLowerCase();
    if (src.indexOf('captcha') < 0) { continue; }
    var box = frames[i].getBoundingClientRect();
    var look = window.getComputedStyle ? window.getComputedStyle(frames[i]) : null;
    var hidden = box.width < 2 || box.height < 2 || (look && (look.display === 'none' || look.visibility === 'hidden'));
    if (!hidden) { out.block = 'captcha_frame'; break; }
  }
}
(p.challenges || []).some(function (c, k) {
  if ((c.text && body.indexOf(c.text) >= 0) || (c.selector && q(c.selector))) { out.challenge = k; return true; }
  return false;
});
out.no_results = !!q(p.no_results_selector) || (!!p.no_results_text && body.indexOf(p.no_results_text) >= 0);
(p.dom || []).forEach(function (sel, k) {
  var found = sel ? all(sel) : [];
  out.counts.push(found.length);
  var htmls = [];
  if (sel && p.read) {
    for (var j = 0; j < found.length && j < p.max_dom; j++) { htmls.push(found[j].outerHTML); }
  }
  out.snapshot.dom.push(htmls);
});
(p.scripts || []).forEach(function (sel) {
  var el = sel && p.read ? q(sel) : null;
  out.snapshot.scripts.push(el ? String(el.textContent || '') : null);
});
var captured = window.__lpsCaptured || [];
out.captured_count = captured.length;
out.failed = (window.__lpsFailed || []).slice(0, 50);
if (p.read && p.captured) {
  for (var c = p.captured_from || 0; c < captured.length; c++) { out.snapshot.captured.push(captured[c]); }
}
var next = q(p.next_selector);
if (next) { out.next_href = next.href || next.getAttribute('href') || null; }
var more = q(p.more_button);
if (more) {
  var r = more.getBoundingClientRect();
  var style = window.getComputedStyle ? window.getComputedStyle(more) : null;
  var shown = r.width > 0 && r.height > 0 && !(style && (style.visibility === 'hidden' || style.display === 'none')) && !more.disabled;
  if (shown) { out.more_button = { x: r.left + r.width / 2, y: r.top + r.height / 2, in_view: r.top >= 0 && r.bottom <= (window.innerHeight || 0) }; }
}
return out;
"#;

/// Brings the "more" button into view (the click itself is a CDP mouse event).
pub const SCROLL_INTO_VIEW_JS: &str = r#"
var el = null;
try { el = document.querySelector(arguments[0]); } catch (e) {}
if (el) { el.scrollIntoView({ block: 'center', inline: 'nearest' }); }
return !!el;
"#;
