// What one context (a window or a worker global scope) shows of the identity: the
// `collect` of the contexts probe, also loaded by its workers (`importScripts`).
var collect = (function () {
  return function (scope, isWindow) {
  var n = scope.navigator, r = {};
  function safe(k, f) { try { r[k] = f(); } catch (e) { r[k] = 'error'; } }
  safe('userAgent', function () { return n.userAgent; });
  safe('platform', function () { return n.platform; });
  safe('language', function () { return n.language; });
  safe('languages', function () { return Array.prototype.join.call(n.languages, ','); });
  safe('hardwareConcurrency', function () { return n.hardwareConcurrency; });
  safe('deviceMemory', function () { return n.deviceMemory; });
  safe('timezone', function () { return Intl.DateTimeFormat().resolvedOptions().timeZone; });
  safe('uaBrands', function () { return n.userAgentData.brands.map(function (b) { return b.brand + '/' + b.version; }).join(','); });
  safe('uaPlatform', function () { return n.userAgentData.platform + (n.userAgentData.mobile ? '/mobile' : ''); });
  safe('webgl', function () {
    var canvas = isWindow ? scope.document.createElement('canvas') : new scope.OffscreenCanvas(1, 1);
    var gl = canvas.getContext('webgl');
    if (!gl) { return 'no context'; }
    var d = gl.getExtension('WEBGL_debug_renderer_info');
    return d ? gl.getParameter(d.UNMASKED_VENDOR_WEBGL) + ' | ' + gl.getParameter(d.UNMASKED_RENDERER_WEBGL) : 'no debug info';
  });
  if (isWindow) {
    // NB: `navigator.webdriver` is a window's only (WorkerNavigator has none).
    safe('webdriver', function () { return n.webdriver; });
    safe('screen', function () { return [scope.screen.width, scope.screen.height, scope.screen.colorDepth].join('x'); });
  }
  return r;
};
})();
