// torchrecorder's notebook view without its own viewer: it asks the frames of the notebook for
// the viewer that the first view of its kernel session carries, then runs it on its own data.
// The page's Content-Security-Policy names the SHA-256 of each viewer script: a frame that
// answers with any other code cannot run it here.  Without an answer the page says so.  Once
// it runs, it hands the viewer on to the views that ask, as the first view does.
(function () {
  "use strict";
  const need = JSON.parse(document.getElementById("tr-need").textContent);
  const wait = document.getElementById("tr-wait");
  let done = false, asked = 0, timer = 0;
  function frames() {
    const out = [], queue = [];
    try { const top = window.top; for (let i = 0; i < top.length; i++) queue.push(top[i]); } catch (e) { /* none */ }
    while (queue.length && out.length < 2000) {
      const w = queue.shift();
      out.push(w);
      let n = 0;
      try { n = w.length; } catch (e) { n = 0; }
      for (let i = 0; i < n; i++) { try { queue.push(w[i]); } catch (e) { /* gone */ } }
    }
    return out;
  }
  function ask() {
    timer = 0;
    if (done) return;  // (a refused answer re-arms the asking)
    frames().forEach(function (w) {
      if (w === window) return;
      try { w.postMessage({ torchrecorder: "viewer?", version: need.version }, "*"); } catch (e) { /* gone */ }
    });
    asked += 1;
    if (asked === need.tries) {
      wait.textContent = need.missing;
      wait.className = "tr-missing";
    }
    // then once a second for two minutes more: a view that loads late (scrolled to) still counts
    if (asked < need.tries + 120) timer = setTimeout(ask, asked < need.tries ? 250 : 1000);
  }
  function refused() {
    done = false;
    if (!timer) timer = setTimeout(ask, 250);
  }
  window.addEventListener("message", function (ev) {
    const m = ev.data;
    if (done || !m || typeof m !== "object" || m.torchrecorder !== "viewer" || m.version !== need.version
        || typeof m.fonts !== "string" || !Array.isArray(m.scripts) || m.scripts.length !== 2
        || typeof m.scripts[0] !== "string" || typeof m.scripts[1] !== "string") return;
    done = true;
    // the policy runs a script only if its hash is one it names: anything else is refused
    // (and the next answer is awaited)
    const viz = document.createElement("script");
    viz.id = "tr-viz";  // (the page's layout worker is made from its text)
    viz.textContent = m.scripts[0];
    document.body.appendChild(viz);
    if (typeof window.Viz === "undefined") { viz.remove(); refused(); return; }
    const style = document.createElement("style");
    style.id = "tr-fonts";  // (the downloads carry the fonts from it)
    style.textContent = m.fonts;
    document.head.appendChild(style);
    const page = document.createElement("script");
    page.textContent = m.scripts[1];
    document.body.appendChild(page);
    if (!window.__tr) { page.remove(); style.remove(); refused(); return; }
    wait.remove();
    // from now on this view hands the viewer on, as the first view does: a notebook that
    // unloads outputs out of sight (JupyterLab's windowing) keeps it while any view is loaded
    const viewer = { torchrecorder: "viewer", version: need.version, fonts: m.fonts, scripts: m.scripts };
    window.addEventListener("message", function (ask) {
      const q = ask.data;
      if (ask.source && q && typeof q === "object" && q.torchrecorder === "viewer?" && q.version === need.version) {
        ask.source.postMessage(viewer, "*");
      }
    });
  });
  ask();
})();
