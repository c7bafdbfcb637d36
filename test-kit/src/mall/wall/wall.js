// The bot wall's client check (see the module doc of `crate::mall::wall`, which lists
// every signal and why a missing API counts as it does). Reads the nonce and the verdict
// path from `div#lps-wall`, runs every check, POSTs
// `{"nonce", "signals": {name: bool}, "details": {key: string}}` and reloads the page
// once the mall answers 200. ES5 plus Promise; each check is isolated, so a browser that
// lacks an API cannot make the script throw.
(function () {
  'use strict';
  var box = document.getElementById('lps-wall');
  var NONCE = box ? box.getAttribute('data-nonce') || '' : '';
  var VERDICT = box ? box.getAttribute('data-verdict') || '' : '';
  var nav = typeof navigator !== 'undefined' ? navigator : {};
  var ua = String(nav.userAgent || '');
  var majorMatch = /Chrome\/(\d+)/.exec(ua);
  var uaMajor = majorMatch ? majorMatch[1] : null;
  var chromeLike = uaMajor !== null;
  var mobile = /Mobi|Android|iPhone|iPad/.test(ua);
  var hasPromise = typeof Promise === 'function';
  var signals = {};
  var details = {};
  var pending = [];
  var sent = false;

  function text(v) {
    try { return String(v).slice(0, 200); } catch (e) { return '?'; }
  }
  function note(key, value) { details[key] = text(value); }
  function nativeText(s) { return /\{\s*\[native code\]\s*\}\s*$/.test(s); }
  function isNative(fn) {
    try {
      return typeof fn === 'function' && nativeText(Function.prototype.toString.call(fn));
    } catch (e) {
      return false;
    }
  }
  function own(obj, name) { return Object.prototype.hasOwnProperty.call(obj, name); }
  function firstLanguage(langs) { return langs && langs.length ? String(langs[0]) : ''; }

  // A synchronous check; `onError` is the verdict when it throws.
  function check(name, onError, fn) {
    var flagged;
    try {
      flagged = fn() === true;
    } catch (e) {
      flagged = onError;
      note('error.' + name, e && e.message);
    }
    signals[name] = flagged;
  }

  // An asynchronous check: `fn` returns a promise of a boolean; `onError` is the verdict
  // when it throws, rejects or has not answered after `ms`.
  function later(name, onError, ms, fn) {
    signals[name] = onError;
    if (!hasPromise) { note('error.' + name, 'no Promise'); return; }
    pending.push(new Promise(function (resolve) {
      var done = false;
      var timer = null;
      function finish(flagged, why) {
        if (done) { return; }
        done = true;
        if (timer !== null) { clearTimeout(timer); }
        signals[name] = flagged;
        if (why) { note('error.' + name, why); }
        resolve();
      }
      timer = setTimeout(function () { finish(onError, 'timeout'); }, ms);
      try {
        Promise.resolve(fn()).then(function (v) { finish(v === true); },
          function (e) { finish(onError, (e && e.message) || 'rejected'); });
      } catch (e) {
        finish(onError, (e && e.message) || 'threw');
      }
    }));
  }

  // ---- navigator.webdriver and its patches ----
  check('webdriver', true, function () { return nav.webdriver === true; });
  check('webdriver_patched', true, function () {
    if (Object.getOwnPropertyDescriptor(nav, 'webdriver')) { return true; }
    var proto = typeof Navigator === 'function' ? Navigator.prototype : Object.getPrototypeOf(nav);
    var d = proto ? Object.getOwnPropertyDescriptor(proto, 'webdriver') : undefined;
    if (!d) { return chromeLike; }
    if (typeof d.get !== 'function') { return true; }
    return !isNative(d.get);
  });
  check('native_tostring_patched', true, function () {
    var ts = Function.prototype.toString;
    if (!nativeText(ts.call(ts)) || own(ts, 'prototype')) { return true; }
    try {
      ts.call({});
    } catch (e) {
      return !(e instanceof TypeError);
    }
    return true;
  });

  // ---- globals left by drivers ----
  var DRIVER_NAME = /^(\$?cdc_|\$wdc_|\$chrome_asyncScriptInfo|__\$webdriverAsyncExecutor|__webdriver|__selenium|__driver|__fxdriver|_selenium|_Selenium_IDE_Recorder|calledSelenium|webdriver_)/;
  check('driver_globals', true, function () {
    var found = null;
    [window, document].forEach(function (obj) {
      Object.getOwnPropertyNames(obj).forEach(function (n) {
        if (found === null && DRIVER_NAME.test(n)) { found = n; }
      });
    });
    var root = document.documentElement;
    if (found === null && root && root.getAttribute) {
      ['webdriver', 'selenium', 'driver'].forEach(function (a) {
        if (found === null && root.getAttribute(a) !== null) { found = '@' + a; }
      });
    }
    if (found !== null) { note('driver_global', found); }
    return found !== null;
  });
  check('automation_globals', true, function () {
    var names = ['callPhantom', '_phantom', '__phantomas', '__nightmare', 'domAutomation',
      'domAutomationController', '__playwright__binding__', '__pwInitScripts',
      '_WEBDRIVER_ELEM_CACHE', '__lastWatirAlert', '__lastWatirConfirm', '__lastWatirPrompt',
      'awesomium', 'Cypress'];
    for (var i = 0; i < names.length; i++) {
      if (names[i] in window) { note('automation_global', names[i]); return true; }
    }
    return false;
  });

  // ---- user agent and client hints ----
  note('user_agent', ua);
  note('platform', nav.platform);
  check('ua_headless', true, function () { return /Headless/i.test(ua); });
  check('uad_brands', true, function () {
    var uad = nav.userAgentData;
    if (!uad) { return false; }
    var brands = uad.brands || [];
    note('uad_brands', brands.map(function (b) { return b.brand + '/' + b.version; }).join(', '));
    for (var i = 0; i < brands.length; i++) {
      if (/Headless/i.test(brands[i].brand)) { return true; }
    }
    if (uaMajor === null) { return true; }
    for (var j = 0; j < brands.length; j++) {
      var b = brands[j];
      if ((b.brand === 'Chromium' || b.brand === 'Google Chrome') && String(b.version) === uaMajor) {
        return false;
      }
    }
    return true;
  });
  check('uad_platform', true, function () {
    var uad = nav.userAgentData;
    if (!uad || !uad.platform) { return false; }
    var families = {
      'Windows': /^Win/,
      'macOS': /^Mac/,
      'Linux': /^Linux/,
      'Chrome OS': /^Linux|^CrOS/,
      'Android': /^Linux|^Android|^$/
    };
    var family = families[uad.platform];
    note('uad_platform', uad.platform);
    return family ? !family.test(String(nav.platform || '')) : false;
  });
  check('ua_platform', true, function () {
    var p = String(nav.platform || '');
    if (/Windows NT/.test(ua)) { return !/^Win/.test(p); }
    if (/iPhone|iPad|iPod/.test(ua)) { return !/^(iPhone|iPad|iPod|MacIntel)/.test(p); }
    if (/Android/.test(ua)) { return !/^Linux|^Android|^$/.test(p); }
    if (/Macintosh|Mac OS X/.test(ua)) { return !/^Mac/.test(p); }
    if (/CrOS|X11|Linux/.test(ua)) { return !/^Linux|^CrOS/.test(p); }
    return false;
  });
  check('engine_mismatch', true, function () {
    if (chromeLike) { return eval.toString().length !== 33; }
    if (/Firefox\/\d+/.test(ua)) { return 'chrome' in window || !!nav.userAgentData; }
    if (/Version\/[\d.]+.*Safari\//.test(ua)) { return 'chrome' in window; }
    return false;
  });

  // ---- locale ----
  check('languages', true, function () {
    var first = firstLanguage(nav.languages);
    note('languages', nav.languages ? Array.prototype.join.call(nav.languages, ',') : 'none');
    return !/^ko/i.test(first) || String(nav.language || '').toLowerCase() !== 'ko-kr';
  });
  check('timezone', true, function () {
    var tz = Intl.DateTimeFormat().resolvedOptions().timeZone;
    var offset = new Date().getTimezoneOffset();
    note('timezone', tz + ' ' + offset);
    return tz !== 'Asia/Seoul' || offset !== -540;
  });

  // ---- window, screen and hardware ----
  check('window_size', true, function () {
    var ow = window.outerWidth, oh = window.outerHeight, s = window.screen;
    note('window', ow + 'x' + oh + ' in ' + (s ? s.width + 'x' + s.height : 'none'));
    if (!ow || !oh || !s || !s.width || !s.height) { return true; }
    if (mobile) { return false; }
    var slack = 16;
    return s.width + slack < ow || s.height + slack < oh;
  });
  check('device_pixel_ratio', true, function () { return !(window.devicePixelRatio > 0); });
  check('hardware_concurrency', true, function () { return !(nav.hardwareConcurrency > 0); });
  check('no_chrome_object', true, function () { return chromeLike && !window.chrome; });
  check('no_plugins', true, function () {
    if (!nav.plugins) { return true; }
    return !mobile && nav.plugins.length === 0;
  });
  check('no_mime_types', true, function () {
    if (!nav.mimeTypes) { return true; }
    return !mobile && nav.mimeTypes.length === 0;
  });

  // ---- permissions ----
  later('notification_permission', false, 1500, function () {
    var N = window.Notification;
    var perms = nav.permissions;
    if (!N || !perms || typeof perms.query !== 'function') { return false; }
    return perms.query({ name: 'notifications' }).then(function (status) {
      note('notification', N.permission + '/' + status.state);
      return N.permission === 'denied' && status.state === 'prompt';
    });
  });

  // ---- graphics and fonts ----
  check('webgl_swiftshader', false, function () {
    var c = document.createElement('canvas');
    var gl = c.getContext && (c.getContext('webgl') || c.getContext('experimental-webgl'));
    if (!gl) { note('webgl_renderer', 'none'); return false; }
    var ext = gl.getExtension('WEBGL_debug_renderer_info');
    var renderer = String(gl.getParameter(ext ? ext.UNMASKED_RENDERER_WEBGL : gl.RENDERER));
    note('webgl_renderer', renderer);
    return /SwiftShader/i.test(renderer);
  });
  check('no_cjk_font', false, function () {
    function glyph(ch) {
      var c = document.createElement('canvas');
      c.width = 24;
      c.height = 24;
      var ctx = c.getContext && c.getContext('2d');
      if (!ctx) { return null; }
      ctx.textBaseline = 'top';
      ctx.font = '16px sans-serif';
      ctx.fillStyle = '#000';
      ctx.fillText(ch, 2, 2);
      var data = ctx.getImageData(0, 0, 24, 24).data;
      var ink = 0, key = [];
      for (var i = 3; i < data.length; i += 4) {
        if (data[i]) { ink++; }
        key.push(data[i]);
      }
      return { ink: ink, key: key.join(',') };
    }
    var latin = glyph('A');
    if (!latin || latin.ink === 0) { return false; }
    var ga = glyph('\uAC00'), na = glyph('\uB098');
    note('cjk_ink', ga.ink + '/' + na.ink);
    return (ga.ink === 0 && na.ink === 0) || ga.key === na.key;
  });

  // ---- other realms: an iframe and a dedicated worker ----
  var frameProbe = !hasPromise ? null : new Promise(function (resolve) {
    var done = false;
    var frame = document.createElement('iframe');
    function read() {
      if (done) { return; }
      done = true;
      var got = null;
      try {
        var n = frame.contentWindow.navigator;
        got = { webdriver: n.webdriver === true, ua: String(n.userAgent || ''),
          lang: firstLanguage(n.languages) };
      } catch (e) {
        note('error.iframe', e && e.message);
      }
      try { frame.parentNode.removeChild(frame); } catch (e) { /* already gone */ }
      resolve(got);
    }
    try {
      frame.style.display = 'none';
      frame.srcdoc = '<!DOCTYPE html><p>w';
      frame.onload = read;
      (document.body || document.documentElement).appendChild(frame);
    } catch (e) {
      note('error.iframe', e && e.message);
      read();
      return;
    }
    setTimeout(read, 1500);
  });
  later('iframe_webdriver', false, 2000, function () {
    return frameProbe.then(function (f) { return f !== null && f.webdriver; });
  });
  later('iframe_inconsistent', false, 2000, function () {
    return frameProbe.then(function (f) {
      return f !== null && (f.ua !== ua || f.lang !== firstLanguage(nav.languages));
    });
  });

  var WORKER_SRC = 'var n = self.navigator || {}; var tz = "";' +
    'try { tz = Intl.DateTimeFormat().resolvedOptions().timeZone; } catch (e) {}' +
    'postMessage({ webdriver: n.webdriver === true, ua: String(n.userAgent || ""),' +
    ' lang: n.languages && n.languages.length ? String(n.languages[0]) : null, tz: tz });';
  var workerProbe = !hasPromise ? null : new Promise(function (resolve) {
    var W = window.Worker, U = window.URL;
    if (typeof W !== 'function' || typeof window.Blob !== 'function' || !U || !U.createObjectURL) {
      resolve(null);
      return;
    }
    var url = null, worker = null, timer = null;
    function finish(v) {
      if (timer !== null) { clearTimeout(timer); timer = null; }
      try { if (worker) { worker.terminate(); } } catch (e) { /* gone */ }
      try { if (url) { U.revokeObjectURL(url); } } catch (e) { /* gone */ }
      resolve(v);
    }
    try {
      url = U.createObjectURL(new window.Blob([WORKER_SRC], { type: 'application/javascript' }));
      worker = new W(url);
      worker.onmessage = function (e) { finish(e.data || null); };
      worker.onerror = function () { note('error.worker', 'onerror'); finish(null); };
      timer = setTimeout(function () { note('error.worker', 'timeout'); finish(null); }, 1500);
    } catch (e) {
      note('error.worker', e && e.message);
      finish(null);
    }
  });
  later('worker_webdriver', false, 2000, function () {
    return workerProbe.then(function (w) { return w !== null && w.webdriver === true; });
  });
  later('worker_user_agent', false, 2000, function () {
    return workerProbe.then(function (w) {
      if (w === null) { return false; }
      note('worker_ua', w.ua);
      return /Headless/i.test(w.ua) || w.ua !== ua;
    });
  });
  later('worker_languages', false, 2000, function () {
    return workerProbe.then(function (w) {
      return w !== null && w.lang !== null && !/^ko/i.test(w.lang);
    });
  });
  later('worker_timezone', false, 2000, function () {
    return workerProbe.then(function (w) {
      return w !== null && !!w.tz && w.tz !== 'Asia/Seoul';
    });
  });

  // ---- an attached DevTools (CDP) Runtime client serializes console arguments ----
  var cdpHit = false;
  try {
    var probe = new Error('lps-wall');
    Object.defineProperty(probe, 'stack', {
      configurable: true,
      get: function () { cdpHit = true; return ''; }
    });
    if (window.console && typeof window.console.debug === 'function') { window.console.debug(probe); }
  } catch (e) {
    note('error.cdp_probe', e && e.message);
  }
  later('cdp_runtime', false, 1000, function () {
    return new Promise(function (resolve) { setTimeout(function () { resolve(cdpHit); }, 50); });
  });

  // ---- the report ----
  function say(message) {
    if (!box) { return; }
    var p = document.createElement('p');
    p.className = 'lps-wall-error';
    p.textContent = message;
    box.appendChild(p);
  }
  function send() {
    if (sent) { return; }
    sent = true;
    var xhr = new XMLHttpRequest();
    xhr.open('POST', VERDICT, true);
    xhr.setRequestHeader('Content-Type', 'application/json');
    xhr.onload = function () {
      if (xhr.status === 200) { location.reload(); } else { say('접속 환경을 확인하지 못했습니다 (' + xhr.status + ')'); }
    };
    xhr.onerror = function () { say('접속 환경을 확인하지 못했습니다'); };
    xhr.send(JSON.stringify({ nonce: NONCE, signals: signals, details: details }));
  }
  if (hasPromise && pending.length) {
    Promise.all(pending).then(send, send);
    setTimeout(send, 5000);
  } else {
    send();
  }
})();
