// torchrecorder's interactive view, part 4 of 5 (page_layout.js): the layout: Graphviz in a worker
// (or the page), one layout at a time, cancel and recovery from a failure.
(function (P) {
  "use strict";
  const { LAYER, n, kind, canOpen, canvas, status, T, applyTransform, fit, topMiddle, elementOf, snapshot,
    restore, fitted, busyBox, busyText, cancel, showNote } = P;
  // ---------------------------------------------------------------- layout
  // Graphviz runs in a Web Worker made from the inlined viz.js (a Blob URL: no file, no
  // request), so that the page answers while it lays out: "Cancel" ends the worker; a worker
  // that fails (a Graphviz assertion, memory out of bounds) is replaced by a fresh one, and
  // the view drawn before stays.  Where no worker can start, Graphviz runs in the page.
  function workerMain() {
    /* global Viz */
    const ready = Viz.instance();
    self.onmessage = function (ev) {
      const job = ev.data;
      ready.then(function (viz) {
        let out;
        try { out = { id: job.id, svg: viz.renderString(job.dot, { format: "svg" }) }; }
        catch (err) { out = { id: job.id, error: String(err && err.message || err) }; }
        self.postMessage(out);
      }, function (err) { self.postMessage({ id: job.id, error: "viz.js did not start: " + err }); });
    };
    ready.then(function () { self.postMessage({ ready: true }); },
               function (err) { self.postMessage({ ready: false, error: String(err) }); });
  }
  let workerUrl = null;
  function newEngine(done) {
    // done(engine or null): {render(dot, reply(error, svgText)), stop()}
    let worker;
    try {
      if (!workerUrl) {
        const src = document.getElementById("tr-viz").textContent + "\n;(" + workerMain.toString() + ")();\n";
        workerUrl = URL.createObjectURL(new Blob([src], { type: "text/javascript" }));
      }
      worker = new Worker(workerUrl);
    } catch (err) { mainThreadEngine(done); return; }
    let started = false, reply = null, jobs = 0;
    const made = {
      worker: true,
      render: function (dot, fn) { reply = fn; jobs += 1; worker.postMessage({ id: jobs, dot: dot }); },
      stop: function () { reply = null; worker.terminate(); },
    };
    worker.onmessage = function (ev) {
      const m = ev.data;
      if (m.ready !== undefined) {
        if (started) return;
        started = true;
        if (m.ready) done(made); else { worker.terminate(); mainThreadEngine(done); }
        return;
      }
      if (m.id !== jobs || !reply) return;
      const fn = reply; reply = null;
      fn(m.error || null, m.svg || null);
    };
    worker.onerror = function (ev) {
      ev.preventDefault();
      if (!started) { started = true; worker.terminate(); mainThreadEngine(done); return; }
      if (reply) { const fn = reply; reply = null; fn(String(ev.message || "the layout worker failed"), null); }
    };
  }
  function mainThreadEngine(done) {
    Viz.instance().then(function (v) {
      done({
        worker: false,
        render: function (dot, fn) {
          let svg = null, error = null;
          try { svg = v.renderString(dot, { format: "svg" }); } catch (err) { error = String(err && err.message || err); }
          fn(error, svg);
        },
        stop: function () {},
      });
    }, function (err) {
      T.error = String(err);
      setStatus("Graphviz (viz.js) did not start: " + T.error, true);
    });
  }
  P.engine = null; P.pending = null; P.current = null;
  let busy = false, shownState = null, shownDot = "", shownMeasured = null;  // (the view on screen)
  function setStatus(text, error) { status.textContent = text; status.classList.toggle("tr-error", !!error); }
  // lay the view out again (now, or after the layout under way); the module ``anchor`` stays
  // where it is on screen; ``then`` runs once the new drawing is on screen (a layout asked
  // for meanwhile takes the place of this one, and its callbacks with it); ``how``: keep (the
  // node the budget keeps in view; the anchor by default), mayFold (whether the budget may
  // fold runs and loops again: false where the reader unfolded them), force (no budget)
  function layout(anchor, then, how) {
    const calls = P.pending ? P.pending.then : [];
    if (then) calls.push(then);
    anchor = anchor === undefined ? -1 : anchor;
    how = how || {};
    P.pending = { anchor: anchor, then: calls, keep: how.keep !== undefined ? how.keep : anchor,
                mayFold: how.mayFold !== false, force: !!how.force };
    if (!busy && P.engine) run();
  }
  function run() {
    busy = true;
    const job = P.pending; P.pending = null;
    const t0 = performance.now();
    let before = null;
    if (job.anchor >= 0) { const el = elementOf(job.anchor); if (el) before = topMiddle(el); }
    const wanted = snapshot();
    const got = fitted(job);
    T.error = null;  // (the error of the last layout, if it failed)
    P.asked = got.note ? wanted : null;
    T.dot = got.dot;
    T.measured = P.measured;
    P.current = job;
    // (shown over the drawing: the tool bar keeps its size, the drawing its place)
    busyText.textContent = "laying out " + P.measured.nodes.toLocaleString("en-US") + " nodes…";
    busyBox.hidden = false;
    P.engine.render(got.dot, function (error, text) {
      if (P.current !== job) return;  // cancelled
      P.current = null;
      busyBox.hidden = true;
      let svg = null;
      if (!error) {
        svg = new DOMParser().parseFromString(text, "image/svg+xml").documentElement;
        if (!svg || svg.nodeName !== "svg") error = "Graphviz returned no drawing";
      }
      if (error) { failed(job, error); return; }
      const refocus = canvas.contains(document.activeElement) ? P.focusAfter : -1;
      canvas.replaceChildren(svg);
      decorate(svg);
      if (refocus >= 0) P.focusBox(refocus);  // (the box or title Enter was pressed on)
      P.focusAfter = -1;
      shownState = snapshot(); shownDot = got.dot; shownMeasured = T.measured;
      if (T.firstPaint === null) { T.firstPaint = performance.now(); fit(); before = null; }
      if (before) { const el = elementOf(job.anchor); if (el) { const after = topMiddle(el); P.tx += before[0] - after[0]; P.ty += before[1] - after[1]; applyTransform(); } }
      // a drawing wholly outside the window (smaller than the one before, with no anchor on
      // screen to keep: Collapse all, a depth, Fold repeats after a zoom into a large view)
      // is fitted, never left where the reader sees none of it
      if (!onScreen(svg)) fit();
      T.lastLayoutMs = performance.now() - t0;
      T.layouts += 1;
      const shown = canvas.querySelectorAll("g.node:not([id^=l]):not([id^=v])").length;  // (not labels, points)
      setStatus(shown + " nodes · laid out in " + Math.round(T.lastLayoutMs) + " ms");
      showNote(got.note ? "Drawn with " + got.note : "");
      P.syncControls();
      if (P.selected >= 0) P.showDetails(P.selected);
      busy = false;
      if (P.pending) { P.pending.then = job.then.concat(P.pending.then); setTimeout(run, 0); return; }
      job.then.forEach(function (fn) { fn(); });
    });
  }
  // the layout failed or was cancelled: a fresh engine, the view drawn before kept (its state
  // back), what happened said
  function failed(job, error, cancelled) {
    T.error = cancelled ? null : error;
    T.failures = (T.failures || 0) + (cancelled ? 0 : 1);
    P.current = null; P.pending = null; busy = true; P.asked = null;
    busyBox.hidden = true;
    if (shownState) restore(shownState);
    T.dot = shownDot; T.measured = shownMeasured;  // (the page's report: the view kept, not the one dropped)
    P.syncControls();
    if (P.selected >= 0) P.showDetails(P.selected);
    const old = P.engine;
    P.engine = null;
    old.stop();
    const text = cancelled ? "Layout cancelled; the view before it is kept." :
      "Graphviz could not lay out this view (" + error + "); the view before it is kept.";
    setStatus(cancelled ? "cancelled" : "layout failed", !cancelled);
    showNote(text, !cancelled);
    newEngine(function (e) { P.engine = e; busy = false; if (P.pending) run(); });
  }
  cancel.addEventListener("click", function () { if (P.current) failed(P.current, "", true); });
  function decorate(svg) {
    svg.querySelectorAll("g.node, g.cluster").forEach(function (g) {
      const i = Number(g.id.slice(1));
      if (g.classList.contains("node") && isLayerThatOpens(i)) g.classList.add("tr-can-open");
    });
    // the keyboard: every box, and each open module's title (its cluster where it has none),
    // is reached by Tab in the drawing's order; Enter or Space acts as a click (page_panel.js)
    svg.querySelectorAll("g.node, g.cluster").forEach(function (g) {
      if (!/^[nct]\d+$/.test(g.id) || (g.id.charAt(0) === "c" && svg.getElementById("t" + g.id.slice(1)))) return;
      const i = Number(g.id.slice(1)), opens = i >= n || isLayerThatOpens(i);
      g.setAttribute("tabindex", "0");
      g.setAttribute("role", opens ? "button" : "img");
      g.setAttribute("aria-label", Array.from(g.querySelectorAll("text"), function (t) { return t.textContent; }).join(" "));
      if (opens) g.setAttribute("aria-expanded", g.id.charAt(0) === "n" ? "false" : "true");
    });
    // tooltips: Graphviz's <title> holds the DOT id; the detail panel says more
    svg.querySelectorAll("g.node > title, g.cluster > title").forEach(function (t) { t.remove(); });
    mark();
  }
  function onScreen(svg) {
    const r = svg.getBoundingClientRect(), v = P.view.getBoundingClientRect();
    return r.right > v.left && r.left < v.right && r.bottom > v.top && r.top < v.bottom;
  }
  function isLayerThatOpens(i) { return kind[i] === LAYER && canOpen[i] === 1; }
  function mark() {
    canvas.querySelectorAll(".tr-sel, .tr-hit").forEach(function (g) { g.classList.remove("tr-sel", "tr-hit"); });
    if (P.selected >= 0) { const el = elementOf(P.selected); if (el) el.classList.add("tr-sel"); }
    if (P.hit >= 0) { const el = elementOf(P.hit); if (el) el.classList.add("tr-hit"); }
  }
  Object.assign(P, { run, mark, layout, newEngine, setStatus, failed, isLayerThatOpens });
})(window.__tr.page);
