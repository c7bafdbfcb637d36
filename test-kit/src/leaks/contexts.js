// One identity in every context: what the page reads must be what its iframes (srcdoc,
// and about:blank made by script), a dedicated worker, a shared worker and a service
// worker read. Workers have no screen; a field a context cannot read is left out there.
(function () {
  // The workers load the same `collect` (collect.js).
  var workerSource = 'importScripts(' + JSON.stringify(location.origin + '/leak/collect.js') + ');\n' +
    'if (self.constructor.name === "SharedWorkerGlobalScope") { onconnect = function (e) { e.ports[0].postMessage(collect(self, false)); }; }\n' +
    'else { postMessage(collect(self, false)); }';
  function inWorker() {
    return new Promise(function (done) {
      try {
        var w = new Worker(URL.createObjectURL(new Blob([workerSource], { type: 'text/javascript' })));
        w.onmessage = function (m) { done(m.data); w.terminate(); };
        w.onerror = function () { done(null); };
      } catch (e) { done(null); }
    });
  }
  function inSharedWorker() {
    return new Promise(function (done) {
      try {
        var w = new SharedWorker(URL.createObjectURL(new Blob([workerSource], { type: 'text/javascript' })));
        w.port.onmessage = function (m) { done(m.data); };
        w.onerror = function () { done(null); };
        w.port.start();
      } catch (e) { done(null); }
    });
  }
  function inServiceWorker() {
    return new Promise(function (done) {
      if (!navigator.serviceWorker) { done(null); return; }
      navigator.serviceWorker.register('/leak/contexts-sw.js', { scope: '/leak/' }).then(function (reg) {
        var sw = reg.installing || reg.waiting || reg.active;
        var ch = new MessageChannel();
        ch.port1.onmessage = function (m) { done(m.data); };
        function ask() { sw.postMessage('collect', [ch.port2]); }
        if (sw.state === 'activated') { ask(); } else { sw.addEventListener('statechange', function () { if (sw.state === 'activated') { ask(); } }); }
      }, function () { done(null); });
    });
  }
  // A cross-site frame (localhost is another site than 127.0.0.1): its own renderer
  // process and DevTools target. It posts what it reads.
  function inCrossSiteFrame() {
    return new Promise(function (done) {
      if (location.hostname !== '127.0.0.1') { done('skip'); return; }
      var f = document.createElement('iframe');
      f.style.display = 'none';
      window.addEventListener('message', function (m) {
        if (m.source === f.contentWindow && m.data && m.data.contextsProbe) { done(m.data.contextsProbe); }
      });
      f.src = 'http://localhost:' + location.port + '/leak/contexts-frame';
      document.documentElement.appendChild(f);
    });
  }
  function inFrame(make) {
    return new Promise(function (done) {
      try {
        var f = document.createElement('iframe');
        f.style.display = 'none';
        make(f);
        document.documentElement.appendChild(f);
        if (f.srcdoc) { f.onload = function () { done(collect(f.contentWindow, true)); }; }
        else { done(collect(f.contentWindow, true)); }
      } catch (e) { done(null); }
    });
  }
  var page = collect(window, true);
  Promise.all([
    inFrame(function (f) { f.srcdoc = '<p>frame</p>'; }),
    inFrame(function (f) { f.src = 'about:blank'; }),
    inWorker(),
    inSharedWorker(),
    inServiceWorker(),
    inCrossSiteFrame(),
  ]).then(function (all) {
    var names = ['iframe srcdoc', 'iframe about:blank', 'dedicated worker', 'shared worker', 'service worker', 'cross-site iframe'];
    var diffs = [];
    all.forEach(function (ctx, i) {
      if (ctx === 'skip') { return; }
      if (!ctx) { diffs.push(names[i] + ': unreadable'); return; }
      Object.keys(ctx).forEach(function (k) {
        if (String(ctx[k]) !== String(page[k])) { diffs.push(names[i] + ' ' + k + ' ' + JSON.stringify(ctx[k]) + ' (page ' + JSON.stringify(page[k]) + ')'); }
      });
    });
    window.__leakProbe = { leaked: diffs.length > 0, seen: diffs.length ? diffs.join('; ') : 'all contexts agree: ' + JSON.stringify(page) };
  });
})();
