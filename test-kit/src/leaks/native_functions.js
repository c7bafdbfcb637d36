// Functions a stealth or capture script replaces, read as a detector reads them: a native
// function's source is `function name() { [native code] }`, it has no own `toString`, and
// a method has no `prototype`. A page-visible replacement fails one of these.
(function () {
  var toString = Function.prototype.toString;
  function own(o, k) { return Object.prototype.hasOwnProperty.call(o, k); }
  var targets = [
    ['fetch', window, 'fetch'],
    ['XMLHttpRequest.prototype.open', window.XMLHttpRequest && XMLHttpRequest.prototype, 'open'],
    ['XMLHttpRequest.prototype.send', window.XMLHttpRequest && XMLHttpRequest.prototype, 'send'],
    ['WebGLRenderingContext.prototype.getParameter', window.WebGLRenderingContext && WebGLRenderingContext.prototype, 'getParameter'],
    ['WebGL2RenderingContext.prototype.getParameter', window.WebGL2RenderingContext && WebGL2RenderingContext.prototype, 'getParameter'],
    ['Function.prototype.toString', Function.prototype, 'toString'],
  ];
  var bad = [];
  targets.forEach(function (t) {
    var f;
    try { f = t[1] && t[1][t[2]]; } catch (e) { return; }
    if (typeof f !== 'function') { return; }
    var source;
    try { source = toString.call(f); } catch (e) { bad.push(t[0] + ' toString throws'); return; }
    if (!/^function \w*\(\) \{\s*\[native code\]\s*\}$/.test(source)) { bad.push(t[0] + ' source'); }
    if (own(f, 'toString')) { bad.push(t[0] + ' own toString'); }
    if (own(f, 'prototype')) { bad.push(t[0] + ' has prototype'); }
    if (f.name !== t[2]) { bad.push(t[0] + ' name ' + JSON.stringify(f.name)); }
  });
  window.__leakProbe = { leaked: bad.length > 0, seen: bad.length ? bad.join(', ') : 'all native' };
})();
