/*
 * "Live code" on chapter pages served by `make serve-live` (tools/serve_live.py).
 *
 * serve_live.py injects `window.BOOK_LIVE = {serverUrl, token, kernelName, notebookDir}` into the HTML it serves:
 * a Jupyter server on 127.0.0.1 whose CORS setting allows only the site's origin. Without that object (the
 * static site, `make check-site`, a plain http.server) this script does nothing at all: no button, no request.
 *
 * When the reader presses the button, the thebe 0.9 bundle vendored from the npm registry
 * (_static/vendor/thebe/, tools/fetch_assets.py) is loaded, every code cell of the page becomes an editable
 * thebe cell, a kernel is started (cwd book/, so the notebooks' imports and data work), and all cells run in
 * page order. The widget cells, whose outputs are removed on the static site, then show live widgets
 * (thebe's bundle carries the ipywidgets 8 manager: @jupyter-widgets/base 6 and controls 5).
 */
(function () {
  "use strict";
  var cfg = null; // read at DOMContentLoaded: the injected config may come after this script in <head>

  function staticRoot() {
    // documentation_options.js sits in _static/; its src gives the folder of this build's static files
    var s = document.querySelector('script[src*="documentation_options.js"]');
    if (!s) return "_static/";
    return s.getAttribute("src").replace(/documentation_options\.js.*$/, "");
  }

  function loadScript(src) {
    return new Promise(function (resolve, reject) {
      var el = document.createElement("script");
      el.src = src;
      el.onload = resolve;
      el.onerror = function () { reject(new Error("could not load " + src)); };
      document.head.appendChild(el);
    });
  }

  function loadCss(href) {
    var el = document.createElement("link");
    el.rel = "stylesheet";
    el.href = href;
    document.head.appendChild(el);
  }

  // Mark each code cell's source and give it exactly one output slot, so thebe pairs them in order
  // (thebe matches the n-th source with the n-th output placeholder).
  function markCells() {
    var n = 0;
    document.querySelectorAll("div.cell").forEach(function (cell) {
      var pre = cell.querySelector(".cell_input pre");
      if (!pre) return;
      pre.setAttribute("data-executable", "true");
      pre.setAttribute("data-language", "python");
      var out = cell.querySelector(":scope > .cell_output");
      if (!out) {
        out = document.createElement("div");
        out.className = "cell_output book-live-output";
        cell.appendChild(out);
      }
      out.setAttribute("data-output", "true");
      n += 1;
    });
    return n;
  }

  function notebookPath() {
    // /book/07_data_parallelism.html -> 07_data_parallelism.ipynb: the server's root is book/ (notebookDir)
    var rel = window.location.pathname.replace(/^\/+/, "").replace(/\.html$/, ".ipynb");
    var dir = cfg.notebookDir || "";
    if (dir && rel.indexOf(dir) === 0) rel = rel.slice(dir.length);
    return rel;
  }

  // thebe-core's widget manager fetch()es require.js from cdnjs before it shows any widget; answer that one
  // request with the copy vendored from the npm registry (_static/vendor/requirejs/), so nothing leaves the machine.
  var REQUIREJS_CDN = "https://cdnjs.cloudflare.com/ajax/libs/require.js/2.3.6/require.min.js";
  function keepRequireJsLocal(root) {
    var original = window.fetch.bind(window);
    window.fetch = function (input, init) {
      var url = typeof input === "string" ? input : input && input.url;
      if (url === REQUIREJS_CDN) return original(root + "vendor/requirejs/require.js", init);
      return original(input, init);
    };
  }

  // Live widgets need the page's width (_assets/book.css, body[data-live]): fold the chapter list the way the
  // theme's menu button does on a wide screen (pst-sidebar-hidden), so that button opens it again.
  // sphinx-book-theme toggles pst-sidebar-hidden only from the first .primary-toggle of the page (the navbar's,
  // hidden on a wide screen), so the visible menu button in the article header did nothing there: give it
  // the same action, on wide screens only (narrow ones open the theme's drawer as before).
  function widen() {
    document.body.setAttribute("data-live", "starting");
    var nav = document.querySelector("#pst-primary-sidebar");
    if (!nav) return;
    nav.classList.add("pst-sidebar-hidden");
    var first = document.querySelector(".primary-toggle");
    document.querySelectorAll(".primary-toggle").forEach(function (b) {
      if (b === first || b.getAttribute("data-book-live-toggle")) return;
      b.setAttribute("data-book-live-toggle", "true");
      b.addEventListener("click", function (e) {
        if (!window.matchMedia("(min-width: 992px)").matches) return;
        e.preventDefault();
        e.stopImmediatePropagation();
        nav.classList.toggle("pst-sidebar-hidden");
      }, true);
    });
  }

  async function activate(button, status) {
    button.disabled = true;
    widen();
    status.textContent = "Starting a kernel on " + cfg.serverUrl + " ...";
    try {
      var root = staticRoot();
      keepRequireJsLocal(root);
      loadCss(root + "vendor/thebe/thebe.css");
      await loadScript(root + "vendor/thebe/index.js");
      markCells();
      var result = await window.thebe.bootstrap({
        useBinder: false,
        useJupyterLite: false,
        requestKernel: true,
        mountStatusWidget: false,
        mountActivateWidget: false,
        mountRunAllButton: false,
        mountRestartAllButton: false,
        // no LaTeX renderer: it would fetch MathJax 2 from a CDN
        mathjaxUrl: "",
        serverSettings: { baseUrl: cfg.serverUrl, wsUrl: cfg.serverUrl.replace(/^http/, "ws"), token: cfg.token, appendToken: true },
        kernelOptions: { kernelName: cfg.kernelName || "python3", path: notebookPath() },
        savedSessionOptions: { enabled: false },
        // CodeMirror 5 defaults to a fixed 300px editor that draws only the lines near its own viewport;
        // with every line drawn, _assets/book.css sets height: auto on the "book" theme (cm-s-book), so each
        // editor is as tall as its code, wraps long lines, and takes the page's light/dark colours.
        codeMirrorConfig: { theme: "book", viewportMargin: Infinity, lineWrapping: true },
      });
      status.textContent = "Kernel ready: running the page's cells ...";
      document.body.setAttribute("data-live", "running");
      await result.notebook.executeAll(true);
      status.textContent = "Live: edit a cell and press Shift+Enter (or its run button); move the sliders.";
      document.body.setAttribute("data-live", "ready");
    } catch (err) {
      status.textContent = "Live code failed: " + (err && err.message ? err.message : err);
      document.body.setAttribute("data-live", "error");
      button.disabled = false;
    }
  }

  function addButton() {
    cfg = window.BOOK_LIVE;
    if (!cfg || !cfg.serverUrl) return; // the static site: no control, no request
    if (!document.querySelector("div.cell .cell_input pre")) return; // not a chapter page
    var article = document.querySelector("article.bd-article") || document.querySelector("main") || document.body;
    var bar = document.createElement("div");
    bar.className = "book-live-code";
    var button = document.createElement("button");
    button.type = "button";
    button.className = "book-live-button";
    button.textContent = "Live code";
    button.title = "Run this page's code on the local Jupyter server started by make serve-live";
    var status = document.createElement("span");
    status.className = "book-live-status";
    status.setAttribute("role", "status");
    button.addEventListener("click", function () { activate(button, status); });
    bar.appendChild(button);
    bar.appendChild(status);
    article.insertBefore(bar, article.firstChild);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", addButton);
  else addButton();
})();
