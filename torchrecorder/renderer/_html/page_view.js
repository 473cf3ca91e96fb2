// torchrecorder's interactive view, part 3 of 5 (page_view.js): pan and zoom, and the drawing
// budget: what a view the reader asks for is reduced to, and the note that says so.
(function (P) {
  "use strict";
  const { D, n, parent, depth, runs, blockOf, loops, loopOf, laterIteration, info, $, view, canvas, T,
    isOpen, buildDot } = P;
  // -------------------------------------------------------------- pan/zoom
  P.tx = 0; P.ty = 0; P.scale = 1;
  function applyTransform() {
    T.scale = P.scale;
    canvas.style.transform = "translate(" + P.tx + "px," + P.ty + "px) scale(" + P.scale + ")";
  }
  function svgSize() {
    const svg = canvas.querySelector("svg");
    if (!svg) return [1, 1];
    const r = svg.getBoundingClientRect();
    return [r.width / P.scale, r.height / P.scale];
  }
  function fit() {
    const size = svgSize(), w = view.clientWidth, h = view.clientHeight;
    // the whole drawing in the window, enlarged up to twice its size if it is small
    P.scale = Math.min(2, (w - 20) / size[0], (h - 20) / size[1]);
    if (!(P.scale > 0)) P.scale = 1;
    P.tx = Math.max(10, (w - size[0] * P.scale) / 2); P.ty = Math.max(10, (h - size[1] * P.scale) / 2);
    applyTransform();
  }
  // until the reader zooms or pans, the first view stays fitted when the window (or the
  // notebook cell, or the tool bar wrapping onto two lines) changes size
  P.autoFit = true;
  if (window.ResizeObserver) {
    new ResizeObserver(function () { if (P.autoFit && T.firstPaint !== null) fit(); }).observe(view);
  }
  function zoomAt(factor, cx, cy) {
    P.autoFit = false;
    const s = Math.min(8, Math.max(0.02, P.scale * factor));
    P.tx = cx - (cx - P.tx) * (s / P.scale); P.ty = cy - (cy - P.ty) * (s / P.scale); P.scale = s;
    applyTransform();
  }
  view.addEventListener("wheel", function (ev) {
    ev.preventDefault();
    const r = view.getBoundingClientRect();
    zoomAt(Math.exp(-ev.deltaY * 0.0015), ev.clientX - r.left, ev.clientY - r.top);
  }, { passive: false });
  P.drag = null;
  view.addEventListener("pointerdown", function (ev) {
    if (ev.button !== 0) return;
    P.drag = { x: ev.clientX, y: ev.clientY, tx: P.tx, ty: P.ty, moved: false };
  });
  window.addEventListener("pointermove", function (ev) {
    if (!P.drag) return;
    const dx = ev.clientX - P.drag.x, dy = ev.clientY - P.drag.y;
    if (!P.drag.moved && Math.abs(dx) + Math.abs(dy) > 4) { P.drag.moved = true; view.classList.add("tr-dragging"); }
    if (P.drag.moved) { P.autoFit = false; P.tx = P.drag.tx + dx; P.ty = P.drag.ty + dy; applyTransform(); }
  });
  window.addEventListener("pointerup", function () {
    if (P.drag && P.drag.moved) setTimeout(function () { P.drag = null; }, 0); else P.drag = null;
    view.classList.remove("tr-dragging");
  });
  function centre(el) {
    const v = view.getBoundingClientRect(), r = el.getBoundingClientRect();
    return [r.left + r.width / 2 - v.left, r.top + r.height / 2 - v.top];
  }
  // where a module is on screen, as a new layout keeps it: the middle of its top edge (a box
  // that opens into a cluster keeps its title where the box was, and the other way round)
  function topMiddle(el) {
    const v = view.getBoundingClientRect(), r = el.getBoundingClientRect();
    return [r.left + r.width / 2 - v.left, r.top - v.top];
  }
  function elementOf(i) { return document.getElementById("n" + i) || document.getElementById("c" + i); }
  // unless all of it is in the window already: its middle in the middle of the window (its
  // top a little below the window's top, if it is taller than the window)
  function bringIntoView(el) {
    const v = view.getBoundingClientRect(), r = el.getBoundingClientRect(), w = view.clientWidth, h = view.clientHeight;
    const x0 = r.left - v.left, y0 = r.top - v.top;
    if (x0 >= 0 && y0 >= 0 && x0 + r.width <= w && y0 + r.height <= h) return;
    P.tx += w / 2 - (x0 + r.width / 2);
    P.ty += r.height < h - 20 ? h / 2 - (y0 + r.height / 2) : 10 - y0;
    applyTransform();
  }

  // ---------------------------------------------------------------- budget
  // Python's drawing budget (projection/budget.py, carried in the data; null: none): a view the
  // reader asks for that exceeds it is drawn with what it must folded or collapsed, and the
  // page says so (with a button that draws it all anyway)
  const B = D.budget || null;
  function fits(m) { return !B || (m.nodes <= B.nodes && m.edges <= B.edges && m.spans <= B.spans); }
  function sizeText(m) {
    let text = m.nodes.toLocaleString("en-US") + " nodes, " + m.edges.toLocaleString("en-US") + " edges";
    if (B && m.spans > B.spans) text += " passing " + m.spans.toLocaleString("en-US") + " ranks (at most " + B.spans.toLocaleString("en-US") + ")";
    return text;
  }
  function snapshot() { return { open: P.open.slice(), folded: P.folded.slice(), loopFolded: P.loopFolded.slice() }; }
  function restore(s) { P.open = s.open.slice(); P.folded = s.folded.slice(); P.loopFolded = s.loopFolded.slice(); }
  // whether node i is ``keep`` or holds it (what must stay open for it to be seen)
  function holds(i, keep) { for (let c = keep; c >= 0; c = parent[c]) if (c === i) return true; return false; }
  // the deepest open module's depth + 1 (what the depth control shows)
  function openDepth() {
    let d = 0;
    for (let i = 0; i < n; i++) if (isOpen(i) && depth[i] + 1 > d) d = depth[i] + 1;
    return d;
  }
  // the DOT of the current state within the budget: every run and loop folded but those that
  // ``keep`` lies in a later block or iteration of (first, unless the job unfolded them on
  // purpose: then last), the deepest open modules collapsed, level by level, all but those
  // holding ``keep``, then those too; {dot, note} (note: what was done, "" if nothing)
  function fitted(job) {
    // (as GraphvizRenderer: the edges of a value fed to more than D.fanout boxes rank their
    // ends as every edge does, but in a view over the budget, where they would slow dot down)
    P.shareFanout = false; P.rankWide = true;
    let dot = buildDot();
    if (job.force || fits(P.measured)) {
      const R = D.ranked, m = P.measured;
      if (R && !(m.nodes <= R.nodes && m.edges <= R.edges && m.spans <= R.spans)) {
        P.rankWide = false;
        dot = buildDot();
      }
      return { dot: dot, note: "" };
    }
    P.rankWide = false;
    const wanted = P.measured, did = [];
    P.shareFanout = true;  // first: the edges of a value fed to many boxes drawn once
    dot = buildDot();
    let foldedAll = false, collapsed = false, spared = false, reached = 0;
    function foldAll() {
      if (foldedAll || (P.folded.every(function (f) { return f; }) && P.loopFolded.every(function (f) { return f; }))) return;
      foldedAll = true;
      const was = P.folded.join() + "/" + P.loopFolded.join();
      P.folded = runs.map(function () { return true; });
      P.loopFolded = loops.map(function () { return true; });
      if (job.keep >= 0 && job.keep < n) unfoldFor(job.keep);
      if (P.folded.join() + "/" + P.loopFolded.join() === was) return;  // (those it holds only)
      dot = buildDot();
      did.push("every repeated run and loop folded" + but(job.keep));
    }
    function collapse() {
      for (let pass = 0; pass < 2 && !fits(P.measured); pass++) {
        const spare = pass === 0 && job.keep >= 0 && job.keep < n;
        for (let d = openDepth() - 1; d >= 0 && !fits(P.measured); d--) {
          let closed = false;
          for (let i = 0; i < n; i++) {
            if (isOpen(i) && depth[i] >= d && !(spare && holds(i, job.keep))) { P.open[i] = 0; closed = true; }
          }
          if (closed) { dot = buildDot(); collapsed = true; spared = spare; reached = d; }
        }
      }
    }
    // (as projection/budget.py: a view the shared edges bring within the budget is drawn so)
    if (job.mayFold && !fits(P.measured)) foldAll();
    collapse();
    if (!fits(P.measured)) { foldAll(); collapse(); }
    if (collapsed) {
      did.push("modules deeper than depth " + reached + " collapsed" + (spared ? but(job.keep) : ""));
    }
    if (P.measured.shared.length) {
      did.unshift("the edges of " + P.measured.shared.map(function (a) {
        const d = info(a);
        return d.kind === "module" || !d.path ? d.path || d.name : d.name + " in " + d.path;
      }).join(", ") +
                  " to the boxes each feeds drawn as one (→ N)");
    }
    const note = (did.join(" and ") || "folded") + " to keep the drawing to " + sizeText(P.measured) +
      " (budget " + B.nodes.toLocaleString("en-US") + " / " + B.edges.toLocaleString("en-US") + "; asked for: " +
      sizeText(wanted) + "). Drawing it all may take minutes.";
    return { dot: dot, note: note };
  }
  function but(keep) { return keep >= 0 && keep < n ? " (but those holding " + (info(keep).path || info(keep).name) + ")" : ""; }
  // the runs and loops that must be unfolded for node i to be drawn
  function unfoldFor(i) {
    for (let c = i; c >= 0; c = parent[c]) {
      const b = blockOf.get(c);
      if (b && b[1] > 0) P.folded[b[0]] = false;
      if (laterIteration[c]) P.loopFolded[loopOf[c]] = false;
    }
  }
  const note = $("tr-note"), noteText = $("tr-note-text"), anyway = $("tr-anyway");
  const busyBox = $("tr-busy"), busyText = $("tr-busy-text"), cancel = $("tr-cancel");
  P.asked = null;  // the state the budget reduced, drawn by "Draw it all"
  function showNote(text, error) {
    noteText.textContent = text;
    note.hidden = !text;
    note.classList.toggle("tr-error", !!error);
    anyway.hidden = !P.asked;
  }
  anyway.addEventListener("click", function () {
    if (!P.asked) return;
    restore(P.asked); P.asked = null;
    P.layout(P.anchorOfSelection(), null, { force: true });
  });
  Object.assign(P, { applyTransform, fit, topMiddle, elementOf, snapshot, restore, fitted, busyBox,
    busyText, cancel, showNote, bringIntoView });
})(window.__tr.page);
