// torchrecorder's interactive view, part 5 of 5 (page_panel.js): the detail panel, the controls
// (open, fold, depth, colour, search), the downloads, and the start.
(function (P) {
  "use strict";
  const { D, LAYER, n, parent, kind, depth, canOpen, firstOpen, maxDepth, runs, runOfLead, blockOf, loops,
    loopOf, laterIteration, info, $, canvas, view, details, T, isOpen, fit, elementOf, bringIntoView, newEngine,
    setStatus, layout, run, failed, isLayerThatOpens, mark } = P;
  // --------------------------------------------------------------- details
  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }
  function list(title, items) {
    if (!items || !items.length) return [];
    const ul = el("ul");
    items.forEach(function (t) { ul.appendChild(el("li", t)); });
    return [el("h3", title), ul];
  }
  // the innermost loop whose iterations hold node i (-1: none)
  function loopAround(i) {
    for (let c = i; c >= 0; c = parent[c]) if (loopOf[c] >= 0) return loopOf[c];
    return -1;
  }
  function loopButton(k, text) {
    const b = el("button", text);
    b.type = "button"; b.dataset.action = "fold-loop";
    b.addEventListener("click", function () { toggleLoop(k); });
    return b;
  }
  function showLoop(k) {
    const r = loops[k], actions = el("div", null, "tr-actions");
    const where = r.holder >= 0 ? info(r.holder).path || info(r.holder).name : D.name;
    actions.appendChild(loopButton(k, (P.loopFolded[k] ? "Show the " : "Fold the ") + r.count + " iterations"));
    details.replaceChildren(el("h2", "loop ×" + r.count), el("div", "Python loop in " + where, "tr-sub"), actions,
                            el("p", r.about));
  }
  // the line of code of a module call (where it was called) or an operation, and its editor link
  function sourceBlock(src, call) {
    const box = el("div", null, "tr-source"), head = el("div");
    head.appendChild(document.createTextNode(call ? "called at " : "at "));
    if (src.href) {
      const a = el("a", src.where);
      a.href = src.href; a.title = "open " + src.file + ":" + src.line + " in the editor";
      head.appendChild(a);
    } else head.appendChild(el("span", src.where));
    if (src.function) head.appendChild(document.createTextNode(" in " + src.function));
    box.appendChild(head);
    if (src.code) box.appendChild(el("pre", src.code));
    return box;
  }
  function showDetails(i) {
    const parts = [];
    if (i < 0) { details.replaceChildren(el("p", "Click a module to open or close it; hover or click any node for its details.", "tr-hint")); return; }
    if (i >= n) { showLoop(i - n); return; }
    const d = info(i), run = runOfLead.has(i) ? runs[runOfLead.get(i)] : null;
    // (an operation's path is the module call it ran in: its heading is its own name)
    parts.push(el("h2", d.kind === "operation" ? d.name : d.path || d.name));
    let sub = d.kind;
    if (d.type) sub = d.type + " · " + d.kind;
    if (d.kind === "operation" && d.path) sub = "operation in " + d.path;
    parts.push(el("div", sub, "tr-sub"));
    if (d.source) parts.push(sourceBlock(d.source, d.kind === "module"));
    const actions = el("div", null, "tr-actions");
    if (isLayerThatOpens(i)) {
      const b = el("button", isOpen(i) ? "Collapse" : "Expand");
      b.type = "button"; b.dataset.action = "toggle";
      b.addEventListener("click", function () { toggle(i); });
      actions.appendChild(b);
    }
    if (run) {
      const k = runOfLead.get(i);
      const b = el("button", P.folded[k] ? "Show the " + run.members.length + " blocks" : "Fold the " + run.members.length + " blocks");
      b.type = "button"; b.dataset.action = "fold";
      b.addEventListener("click", function () { P.folded[k] = !P.folded[k]; select(i); layout(i, null, { mayFold: P.folded[k] }); });
      actions.appendChild(b);
    }
    const k = loopAround(i);
    if (k >= 0) actions.appendChild(loopButton(k, (P.loopFolded[k] ? "Show the " : "Fold the ") + loops[k].count + " iterations of its loop"));
    if (actions.childNodes.length) parts.push(actions);
    if (run && P.folded[runOfLead.get(i)]) parts.push(el("p", run.members.length + " identical blocks: " + run.title));
    if (d.kind === "module") {
      parts.push.apply(parts, list("inputs", d.in));
      parts.push.apply(parts, list("outputs", d.out));
      if (d.params && d.params.length) {
        const table = el("table");
        d.params.forEach(function (p) {
          const tr = el("tr");
          [p[0], p[1], p[2], p[3].toLocaleString("en-US")].forEach(function (c) { tr.appendChild(el("td", c)); });
          table.appendChild(tr);
        });
        parts.push(el("h3", "parameters"), table);
      }
      if (d.total_n) {
        const all = d.total_n.toLocaleString("en-US");
        parts.push(el("p", "parameters in all: " + all + (d.total !== all ? " (" + d.total + ")" : "")));
      }
      if (d.cost) parts.push(el("p", "cost: " + d.cost));
      if (d.error) parts.push(el("p", "raised " + d.error, "tr-error-text"));
      if (d.breaks) parts.push.apply(parts, list("torch.compile graph breaks", d.breaks.map(function (b) { return b.where + ": " + b.reason; })));
    } else if (d.kind === "operation") {
      parts.push.apply(parts, list("output shape", d.out));
      if (d.cost) parts.push(el("p", "cost: " + d.cost));
      if (d.error) parts.push(el("p", "raised " + d.error, "tr-error-text"));  // (where a failed recording stopped)
    } else {
      parts.push.apply(parts, list("shape", [d.shape + " " + d.dtype]));
      if (d.device) parts.push(el("p", "on " + d.device));
      if (d.count !== undefined) parts.push(el("p", d.count.toLocaleString("en-US") + " elements"));
    }
    details.replaceChildren.apply(details, parts);
  }
  function select(i) { P.selected = i; showDetails(i); mark(); }

  // --------------------------------------------------------------- actions
  function toggle(i) {
    if (!isLayerThatOpens(i)) return;
    // a module the view does not show (the panel still holds it after Collapse all): its
    // enclosing modules open and its run unfolds first, so that Expand shows it opened
    const hidden = !P.open[i] && !elementOf(i);
    if (hidden) reveal(i);
    P.open[i] = P.open[i] ? 0 : 1;
    select(i);
    if (hidden) layout(-1, function () { const e = elementOf(i); if (e) bringIntoView(e); }, { keep: i });
    else layout(i);
  }
  // fold or unfold loop k; its first child stays where it is on screen
  function toggleLoop(k) {
    P.loopFolded[k] = !P.loopFolded[k];
    const r = loops[k];
    if (P.selected < n) showDetails(P.selected); else select(n + k);
    layout(r.first.length ? r.first[0] : -1, null, { mayFold: P.loopFolded[k] });
  }
  // the module, loop or node whose drawing holds the element el (-1: none)
  function itemAt(el) {
    const g = el && el.closest ? el.closest("g.node, g.cluster") : null;
    return g && /^[nct]\d+$/.test(g.id) && canvas.contains(g) ? Number(g.id.slice(1)) : -1;
  }
  function activate(i) {
    if (i >= n) { select(i); toggleLoop(i - n); } else if (isLayerThatOpens(i)) toggle(i); else select(i);
  }
  canvas.addEventListener("click", function (ev) {
    if (P.drag && P.drag.moved) return;
    const i = itemAt(ev.target);
    if (i >= 0) activate(i);
  });
  // the keyboard (boxes reached by Tab: page_layout.js's decorate): Enter or Space acts as a
  // click, focus stays on what was pressed once the view is drawn again; the focused item's
  // details are in the panel, and it is brought into the window
  canvas.addEventListener("keydown", function (ev) {
    if (ev.key !== "Enter" && ev.key !== " ") return;
    const i = itemAt(ev.target);
    if (i < 0) return;
    ev.preventDefault();
    P.focusAfter = i;
    activate(i);
  });
  canvas.addEventListener("focusin", function (ev) {
    const i = itemAt(ev.target);
    if (i < 0) return;
    if (!ev.target.matches(":focus-visible")) return;  // (by the keyboard, not a click: hover shows it)
    view.scrollLeft = 0; view.scrollTop = 0;  // (the browser scrolls to what gets focus; the view pans instead)
    bringIntoView(ev.target.closest("g.node, g.cluster"));
    focusShown = i;
    if (i !== P.selected) showDetails(i);
  });
  // focus leaving the drawing: the panel back to the selection, if focus had changed it
  let focusShown = -1;
  canvas.addEventListener("focusout", function (ev) {
    if (itemAt(ev.relatedTarget) >= 0 || focusShown < 0) return;
    if (focusShown !== P.selected) showDetails(P.selected);
    focusShown = -1;
  });
  P.focusAfter = -1;
  P.focusBox = function (i) {
    const e = document.getElementById("n" + i) || document.getElementById("t" + i) || document.getElementById("c" + i);
    if (e && e.hasAttribute("tabindex")) e.focus({ preventScroll: true });
  };
  canvas.addEventListener("mouseover", function (ev) {
    const g = ev.target.closest("g.node, g.cluster");
    if (g && /^[nct]\d+$/.test(g.id)) showDetails(Number(g.id.slice(1)));
  });
  canvas.addEventListener("mouseout", function (ev) {
    const to = ev.relatedTarget && ev.relatedTarget.closest ? ev.relatedTarget.closest("g.node, g.cluster") : null;
    if (!to) showDetails(P.selected);
  });

  function setDepth(d) {
    for (let i = 0; i < n; i++) P.open[i] = canOpen[i] && depth[i] < d ? 1 : 0;
  }
  // the selected module (the one clicked last) stays where it is on screen, if it is drawn
  function anchorOfSelection() { return P.selected >= 0 && P.selected < n && elementOf(P.selected) ? P.selected : -1; }
  $("tr-expand-all").addEventListener("click", function () { P.open = canOpen.slice(); layout(anchorOfSelection()); });
  // Collapse all and Reset end a layout under way first: they get the reader out of a view
  // that takes long
  function stopLayout() { if (P.current) failed(P.current, "", true); }
  $("tr-collapse-all").addEventListener("click", function () { stopLayout(); setDepth(1); endSearch(); layout(anchorOfSelection()); });
  const depthInput = $("tr-depth");
  depthInput.max = String(maxDepth);
  depthInput.addEventListener("change", function () {
    const d = Math.max(0, Math.min(maxDepth, parseInt(depthInput.value, 10) || 0));
    depthInput.value = String(d);  // the depth drawn, not what was typed (99, -3, 1.5, "")
    setDepth(d); layout();
  });
  const foldBox = $("tr-fold");
  if (!runs.length && !loops.length) $("tr-fold-label").style.display = "none";
  foldBox.addEventListener("change", function () {
    // folding again after the budget collapsed the view (Fold repeats off on a large model):
    // the modules the reader had open come back, not the collapsed depth
    if (foldBox.checked && P.asked) P.open = P.asked.open.slice();
    P.folded = runs.map(function () { return foldBox.checked; });
    P.loopFolded = loops.map(function () { return foldBox.checked; });
    if (P.selected >= 0) showDetails(P.selected);
    layout(-1, null, { mayFold: foldBox.checked });
  });
  const colourMenu = $("tr-colour");
  if (!D.colour) $("tr-colour-label").style.display = "none";
  else Object.keys(D.colour).forEach(function (stat) {
    const o = document.createElement("option");
    o.value = stat; o.textContent = D.colour[stat].title; colourMenu.appendChild(o);
  });
  colourMenu.addEventListener("change", function () { P.colourBy = colourMenu.value; layout(); });
  // make_html(rec, stat="flops"): the page opens coloured by that menu choice (Reset goes back to it)
  function startColour() {
    P.colourBy = D.colour && D.colour[D.colour_start] ? D.colour_start : "";
    colourMenu.value = P.colourBy;
  }
  startColour();
  function syncControls() {
    let d = 0;
    for (let i = 0; i < n; i++) if (isOpen(i) && depth[i] + 1 > d) d = depth[i] + 1;
    if (document.activeElement !== depthInput) depthInput.value = String(d);
    const all = P.folded.concat(P.loopFolded);
    foldBox.checked = all.length > 0 && all.every(function (f) { return f; });
    foldBox.indeterminate = !foldBox.checked && all.some(function (f) { return f; });
  }
  $("tr-fit").addEventListener("click", function () { P.autoFit = true; fit(); });
  $("tr-reset").addEventListener("click", function () {
    stopLayout();
    P.open = firstOpen.slice(); P.folded = runs.map(function () { return D.folded; }); endSearch();
    select(-1);  // the first view: nothing selected, the panel's hint
    P.loopFolded = loops.map(function () { return D.folded; });
    startColour();
    P.pending = null;
    layout(-1, function () { P.autoFit = true; fit(); });
  });

  // search: the modules whose name, path or type holds the text; Enter goes to the next, Shift+Enter
  // to the one before
  const search = $("tr-search"), found = $("tr-found");
  let matches = [], at = -1, lastQuery = "";
  function findAll(q) {
    const out = [];
    q = q.toLowerCase();
    for (let i = 0; i < n; i++) {
      if (kind[i] !== LAYER) continue;
      const d = info(i);
      // by name or path, or by type (the module's class: LlamaRMSNorm, Linear), as netron's search
      if ((d.path || "").toLowerCase().indexOf(q) >= 0 || (d.name || "").toLowerCase().indexOf(q) >= 0 ||
          (d.type || "").toLowerCase().indexOf(q) >= 0) out.push(i);
    }
    return out;
  }
  function reveal(i) {
    for (let a = parent[i], c = i; a >= 0; c = a, a = parent[a]) {
      if (canOpen[a]) P.open[a] = 1;
      const b = blockOf.get(c);
      if (b && b[1] > 0) P.folded[b[0]] = false;
    }
    const b = blockOf.get(i);
    if (b && b[1] > 0) P.folded[b[0]] = false;
    for (let c = i; c >= 0; c = parent[c]) if (laterIteration[c]) P.loopFolded[loopOf[c]] = false;
  }
  // the search's hit is no longer shown (Collapse all, Reset): no highlight, no "2 of 5";
  // Enter starts again at the first match
  function endSearch() { P.hit = -1; at = -1; found.textContent = ""; }
  function goTo(q, back) {
    if (q !== lastQuery) { matches = q ? findAll(q) : []; at = -1; lastQuery = q; }
    if (!matches.length) { found.textContent = q ? "no match" : ""; P.hit = -1; mark(); return; }
    at = back ? (at <= 0 ? matches.length - 1 : at - 1) : (at + 1) % matches.length;
    P.hit = matches[at];
    found.textContent = (at + 1) + " of " + matches.length;
    reveal(P.hit);
    select(P.hit);
    const target = P.hit;  // this search's hit, whatever the next search finds meanwhile
    layout(-1, function () { const e = elementOf(target); if (e && P.hit === target) bringIntoView(e); }, { keep: target });
  }
  search.addEventListener("keydown", function (ev) {
    if (ev.key === "Enter") { ev.preventDefault(); goTo(search.value.trim(), ev.shiftKey); }
    if (ev.key === "Escape") { search.value = ""; lastQuery = ""; matches = []; P.hit = -1; found.textContent = ""; mark(); }
  });

  // downloads: exactly the view on screen, as SVG text or a PNG drawn from it
  function svgText() {
    const svg = canvas.querySelector("svg");
    if (!svg) return null;
    const copy = svg.cloneNode(true);
    copy.querySelectorAll(".tr-sel, .tr-hit, .tr-can-open").forEach(function (g) { g.classList.remove("tr-sel", "tr-hit", "tr-can-open"); });
    copy.querySelectorAll("[tabindex]").forEach(function (g) {  // (the page's keyboard access)
      ["tabindex", "role", "aria-label", "aria-expanded"].forEach(function (a) { g.removeAttribute(a); });
    });
    copy.setAttribute("xmlns", "http://www.w3.org/2000/svg");
    carryFonts(copy);
    return '<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n' + new XMLSerializer().serializeToString(copy);
  }
  // the web fonts the view is drawn in (Arimo, Tinos: few machines have them) go with the file,
  // as @font-face rules of the families it uses, each family followed by the fonts of the same
  // widths and a generic one: opened elsewhere, or drawn into the PNG, it looks as on screen
  const FALLBACK = { Arimo: "Arimo, Liberation Sans, Arial, Helvetica, sans-serif",
    Tinos: "Tinos, Liberation Serif, Times New Roman, Times, serif" };
  function carryFonts(svg) {
    const used = new Set();
    svg.querySelectorAll("[font-family]").forEach(function (e) {
      const family = e.getAttribute("font-family");
      used.add(family);
      if (FALLBACK[family]) e.setAttribute("font-family", FALLBACK[family]);
    });
    const fonts = document.getElementById("tr-fonts");
    const rules = (fonts ? fonts.textContent : "").split("\n").filter(function (rule) {
      const m = /font-family: "([^"]+)"/.exec(rule);
      return m && used.has(m[1]);
    });
    if (!rules.length) return;
    const style = document.createElementNS("http://www.w3.org/2000/svg", "style");
    style.textContent = rules.join("\n");
    svg.insertBefore(style, svg.firstChild);
  }
  function save(blob, ext) {
    const a = document.createElement("a");
    a.href = URL.createObjectURL(blob);
    a.download = (D.name || "network").replace(/[\\/:*?"<>|\s]+/g, "_") + "." + ext;
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(function () { URL.revokeObjectURL(a.href); }, 10000);
  }
  $("tr-svg").addEventListener("click", function () {
    const text = svgText();
    if (text) save(new Blob([text], { type: "image/svg+xml" }), "svg");
  });
  $("tr-png").addEventListener("click", function () {
    const text = svgText(), svg = canvas.querySelector("svg");
    if (!text) return;
    const w = svg.width.baseVal.value, h = svg.height.baseVal.value, k = 2;
    const img = new Image();
    img.onload = function () {
      const c = document.createElement("canvas");
      c.width = Math.ceil(w * k); c.height = Math.ceil(h * k);
      const ctx = c.getContext("2d");
      ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, c.width, c.height);
      ctx.drawImage(img, 0, 0, c.width, c.height);
      c.toBlob(function (b) { if (b) save(b, "png"); else setStatus("this view is too large for a PNG; use SVG", true); }, "image/png");
    };
    img.onerror = function () { setStatus("could not draw the PNG", true); };
    img.src = "data:image/svg+xml;charset=utf-8," + encodeURIComponent(text);
  });

  // ----------------------------------------------------------------- start
  $("tr-title").textContent = D.name;
  setStatus("laying out…");
  newEngine(function (e) {
    P.engine = e;
    T.worker = e.worker;
    layout();
    T.ready = true;
  });
  Object.assign(P, { el, anchorOfSelection, showDetails, syncControls });
})(window.__tr.page);
