/*
 * How Many GPUs? (tools/build_lite.py adds this script to the lite site's lab/ and notebooks/ pages).
 *
 * The lite copy runs Python in the browser with Pyodide, which the kernel downloads from a CDN when a notebook
 * opens. On a network that blocks the CDN, JupyterLite itself only writes "Failed to fetch ... pyodide.mjs"
 * to its hidden log console: the cells stay at [*] and the kernel status says "Unknown". This script asks the
 * CDN for the same file first (a HEAD request, no body) and, if the request fails, shows a box at the top of
 * the page that says what happened and what to do. It sets <body data-pyodide="reachable|blocked">.
 */
(function () {
  "use strict";
  var PYODIDE_URL = "@PYODIDE_URL@"; // filled in by tools/build_lite.py from jupyterlite-pyodide-kernel

  function show(reason) {
    document.body.setAttribute("data-pyodide", "blocked");
    var host = PYODIDE_URL.replace(/^https?:\/\/([^/]+).*$/, "$1");
    var box = document.createElement("div");
    box.id = "book-pyodide-blocked";
    box.setAttribute("role", "alertdialog");
    box.setAttribute("aria-labelledby", "book-pyodide-blocked-title");
    box.style.cssText = "position:fixed;top:12px;left:50%;transform:translateX(-50%);z-index:100000;" +
      "max-width:720px;width:calc(100% - 48px);box-sizing:border-box;padding:14px 18px;border-radius:6px;" +
      "background:#fff4e5;color:#3b2400;border:2px solid #e65100;box-shadow:0 4px 16px rgba(0,0,0,.25);" +
      "font:15px/1.45 -apple-system,BlinkMacSystemFont,'Segoe UI',Helvetica,Arial,sans-serif";
    box.innerHTML =
      '<strong id="book-pyodide-blocked-title" style="display:block;font-size:16px;margin-bottom:4px">' +
      "Python cannot start in this browser: the network blocked its download</strong>" +
      "These live notebooks run Python inside your browser (Pyodide). It has to be downloaded first from " +
      "<code>" + host + "</code> (Python, numpy, pandas and matplotlib, tens of MB), and that request failed" +
      (reason ? " (<code>" + String(reason).replace(/[<>&]/g, "") + "</code>)" : "") + ". " +
      "Until it loads, cells stay at <code>[*]</code> and nothing runs." +
      "<ul style=\"margin:6px 0 6px 18px;padding:0\">" +
      "<li>Try another network (a phone hotspot, or one without a firewall or proxy that blocks CDNs), " +
      "then reload the page.</li>" +
      "<li>Or run the book on your own machine with no network at all: <code>make lab</code> in a copy of " +
      "the book's repository (README, \"Running a workshop\").</li></ul>" +
      "The book's pages themselves (the site around this notebook) work offline.";
    var close = document.createElement("button");
    close.type = "button";
    close.textContent = "Close";
    close.style.cssText = "float:right;margin:-4px -6px 0 12px;padding:3px 12px;cursor:pointer";
    close.addEventListener("click", function () { box.remove(); });
    box.insertBefore(close, box.firstChild);
    document.body.appendChild(box);
  }

  function check() {
    if (!window.fetch) return;
    fetch(PYODIDE_URL, { method: "HEAD", mode: "no-cors", cache: "no-store" }).then(
      function () { document.body.setAttribute("data-pyodide", "reachable"); },
      function (err) { show(err && err.message); }
    );
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", check);
  else check();
})();
