// torchrecorder's notebook view that carries the viewer: it hands the viewer (the web fonts'
// CSS, viz.js and the page's script, as text) to the later views of the same notebook that
// ask for it by version.  It sends public code only, never this view's data.
(function () {
  "use strict";
  const version = document.currentScript.getAttribute("data-version");
  window.addEventListener("message", function (ev) {
    const m = ev.data;
    if (!ev.source || !m || typeof m !== "object" || m.torchrecorder !== "viewer?" || m.version !== version) return;
    if (document.readyState === "loading") return;  // asked again until this page is whole
    const text = function (id) { return document.getElementById(id).textContent; };
    ev.source.postMessage({ torchrecorder: "viewer", version: version, fonts: text("tr-fonts"),
                            scripts: [text("tr-viz"), text("tr-page")] }, "*");
  });
})();
