// The contexts probe's service worker: answers `collect` on the port it is sent.
importScripts('/leak/collect.js');
self.addEventListener('install', function () { self.skipWaiting(); });
self.addEventListener('activate', function (e) { e.waitUntil(self.clients.claim()); });
self.addEventListener('message', function (e) { e.ports[0].postMessage(collect(self, false)); });
