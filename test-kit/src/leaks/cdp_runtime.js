// A DevTools client with the Runtime domain enabled makes V8 serialise every console
// argument for it; serialising an Error reads its `stack`, which formats the stack
// through `Error.prepareStackTrace`. Without such a client nothing reads it. The hook
// stays in place for a while: a client that enables Runtime later is sent the stored
// messages, serialised then.
(function () {
  var hits = 0;
  var original = Error.prepareStackTrace;
  Error.prepareStackTrace = function (error, frames) {
    hits += 1;
    return original ? original(error, frames) : String(error);
  };
  console.log(new Error('probe'));
  var sync = hits > 0;
  setTimeout(function () {
    Error.prepareStackTrace = original;
    window.__leakProbe = { leaked: hits > 0, seen: 'prepareStackTrace ran ' + hits + ' time(s), ' + (sync ? 'at once' : 'not at once') };
  }, 1500);
})();
