// What automation leaves in a page's globals: names detectors list (chromedriver's
// `cdc_…`, Selenium, Puppeteer, Playwright, PhantomJS), and — whatever they are named —
// globals that alias a builtin (chromedriver keeps `Array`, `Promise`, `Symbol`, … under
// other names for its scripts).
(function () {
  var listed = /^(\$?cdc_|\$wdc_|__webdriver|__selenium|__driver|__fxdriver|_Selenium|__nightmare|__puppeteer|__playwright|__pw|callPhantom|_phantom|domAutomation|_WEBDRIVER)/;
  var builtins = ['Array', 'Object', 'Promise', 'Proxy', 'Symbol', 'JSON', 'Window', 'Function', 'Reflect'];
  var found = [];
  [window, document].forEach(function (root) {
    Object.getOwnPropertyNames(root).forEach(function (k) {
      if (listed.test(k)) { found.push(k); return; }
      if (root !== window) { return; }
      var v;
      try { v = window[k]; } catch (e) { return; }
      builtins.forEach(function (b) {
        if (k !== b && v === window[b] && !(b === 'Window' && k === 'constructor')) { found.push(k + '=' + b); }
      });
    });
  });
  window.__leakProbe = { leaked: found.length > 0, seen: found.length ? found.join(', ') : 'none' };
})();
