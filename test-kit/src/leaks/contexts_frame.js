// The contexts probe's cross-site frame: posts what it reads to its parent.
parent.postMessage({ contextsProbe: collect(window, true) }, '*');
