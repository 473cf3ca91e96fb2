// torchrecorder's interactive view, part 1 of 5 (page_state.js): the data, the state of the view
// (what is open, folded, selected) and which drawn node stands for each node.
// The page's scripts are inlined in this order (html_page.PAGE_SCRIPTS), each an ordinary
// script: they share what they define through one object, window.__tr.page (the view's
// mutable state, as P.open, P.selected, ..., and the functions and constants the later
// parts use), so that nothing but window.__tr reaches the window.
// The view rebuilds the DOT of the modules the reader opened and lays it out with Graphviz
// (viz.js).  Every name reaches the page as text: the data is JSON, labels come back from
// Graphviz as SVG text, and the detail panel is written with textContent.
(function () {
  "use strict";
  const P = {};
  "use strict";
  const D = JSON.parse(document.getElementById("tr-data").textContent);
  const S = D.strings, A = D.attrs, N = D.nodes, E = D.edges;
  const LAYER = 0, OP = 1, PARAM = 4;
  const n = N.length;
  const parent = new Int32Array(n), kind = new Uint8Array(n), depth = new Int32Array(n);
  const canOpen = new Uint8Array(n), firstOpen = new Uint8Array(n);
  const children = [], top = [];
  let maxDepth = 0;
  for (let i = 0; i < n; i++) {
    const row = N[i], p = row[0];
    parent[i] = p; kind[i] = row[1]; canOpen[i] = row[4] >= 0 ? 1 : 0; firstOpen[i] = row[5];
    depth[i] = p >= 0 ? depth[p] + 1 : 0;
    children.push([]);
    if (p >= 0) children[p].push(i); else top.push(i);
    if (canOpen[i] && depth[i] + 1 > maxDepth) maxDepth = depth[i] + 1;
  }
  const runs = D.runs.map(function (r) {
    return { lead: r[0], members: r[1], alias: r[2], cross: r[3], box: r[4], cluster: r[5], title: r[6],
             carried: r[7] || [] };
  });
  const runOfLead = new Map(), blockOf = new Map();
  runs.forEach(function (r, k) {
    runOfLead.set(r.lead, k);
    r.members.forEach(function (m, pos) { blockOf.set(m, [k, pos]); });
  });
  // Python loops: loop k is drawn, while folded, as the cluster numbered n + k holding the
  // children of its first iteration; the children of its later iterations stand for their
  // counterparts in the first (or for nothing); the nodes "shown" and the edges "added" and
  // "carried" (from one iteration to the next: dashed back edges) are drawn only while it is
  // folded, the edges in "cross" only while it is not
  const loops = (D.loops || []).map(function (r) {
    return { holder: r[0], first: r[1], later: r[2], alias: r[3], cross: r[4], cluster: r[5],
             id: S[r[6]], count: r[7], about: S[r[8]], added: r[9], carried: r[10], shown: r[11] };
  });
  const loopOf = new Int32Array(n).fill(-1), laterIteration = new Uint8Array(n);
  const carriedEdges = new Set();
  loops.forEach(function (r) { r.carried.forEach(function (e) { carriedEdges.add(e); }); });
  // (and those of folded runs: from one block to another other than the next, as a backward
  // graph's gradients; drawn only while the run is folded)
  runs.forEach(function (r) { r.carried.forEach(function (e) { carriedEdges.add(e); }); });
  loops.forEach(function (r, k) {
    r.first.forEach(function (i) { loopOf[i] = k; });
    r.later.forEach(function (i) { loopOf[i] = k; laterIteration[i] = 1; });
    r.anchor = r.first.length ? r.first[0] : r.later[0];  // where the folded loop is drawn
  });
  // the parameters something outside their module reads, each with the drawn nodes that read it
  // (not those of a module holding it as its own: a tied output projection), and each node's
  // module path (-1: not a layer); see liftParams
  // (and, by D.lift_box, its attributes drawn beside each closed layer: named from that box down)
  const paramReaders = new Map(), paths = D.paths || [], besideAttrs = new Map();
  (D.lift || []).forEach(function (r, k) {
    paramReaders.set(r[0], r.slice(1));
    const b = (D.lift_box || [])[k] || [], m = new Map();
    for (let j = 0; j + 1 < b.length; j += 2) m.set(b[j], b[j + 1]);
    besideAttrs.set(r[0], m);
  });
  const infos = new Array(n);
  function info(i) { if (infos[i] === undefined) infos[i] = JSON.parse(S[N[i][6]]); return infos[i]; }

  // ------------------------------------------------------------------ state
  P.open = firstOpen.slice();
  P.folded = runs.map(function () { return D.folded; });
  P.loopFolded = loops.map(function () { return D.folded; });
  let rep = new Int32Array(n), lvl = new Int32Array(n);
  P.selected = -1; P.hit = -1;

  const $ = function (id) { return document.getElementById(id); };
  const view = $("tr-view"), canvas = $("tr-canvas"), details = $("tr-details"), status = $("tr-status");
  const T = window.__tr = { ready: false, firstPaint: null, layouts: 0, lastLayoutMs: null, error: null, dot: "" };
  Object.defineProperty(T, "page", { value: P });  // (not enumerated: __tr stays the page's report)

  function isOpen(i) { return kind[i] === LAYER && canOpen[i] === 1 && P.open[i] === 1; }

  // which drawn node stands for each node: itself, the closed module holding it, its
  // counterpart in the first block of a folded run or the first iteration of a folded loop,
  // or nothing (-1)
  function resolve() {
    const alias = new Map();
    const hiddenEdges = new Set();
    loops.forEach(function (r, k) {
      if (!P.loopFolded[k]) {
        r.added.forEach(function (e) { hiddenEdges.add(e); });
        r.carried.forEach(function (e) { hiddenEdges.add(e); });
        r.shown.forEach(function (i) { alias.set(i, -1); });
        return;
      }
      // a later iteration's hidden blocks of a run stand for nothing, unless the run is folded too
      r.later.forEach(function (i) { alias.set(i, -1); });
      for (let j = 0; j < r.alias.length; j += 2) alias.set(r.alias[j], r.alias[j + 1]);
      r.cross.forEach(function (e) { hiddenEdges.add(e); });
    });
    runs.forEach(function (r, k) {
      if (!P.folded[k]) { r.carried.forEach(function (e) { hiddenEdges.add(e); }); return; }
      for (let j = 0; j < r.alias.length; j += 2) alias.set(r.alias[j], r.alias[j + 1]);
      r.cross.forEach(function (e) { hiddenEdges.add(e); });
    });
    const closedAt = new Int32Array(n);
    for (let i = 0; i < n; i++) {
      const p = parent[i];
      if (alias.has(i)) {
        const t = alias.get(i);
        rep[i] = t < 0 ? -1 : rep[t]; lvl[i] = t < 0 ? 0 : lvl[t]; closedAt[i] = -2;
      } else if (p >= 0 && closedAt[p] === -2) {
        rep[i] = -1; lvl[i] = 0; closedAt[i] = -2;
      } else if (p >= 0 && closedAt[p] >= 0) {
        const c = closedAt[p];
        closedAt[i] = c; rep[i] = kind[i] === PARAM ? -1 : c; lvl[i] = depth[i] - depth[c];
      } else {
        rep[i] = i; lvl[i] = 0; closedAt[i] = kind[i] === LAYER && !isOpen(i) ? i : -1;
      }
    }
    liftParams(closedAt);
    if (!D.all_ops) leaveOutUnfed();
    return hiddenEdges;
  }
  // an operation that this view draws but feeds by nothing it draws (only by a parameter hidden
  // in a closed box: a tied weight's transpose in a backward graph), and what only it feeds, is
  // left out with its edges, as make_dot leaves out an operation no drawn input feeds
  const intoNode = [];
  for (let i = 0; i < n; i++) intoNode.push([]);
  E.forEach(function (row, e) { intoNode[row[1]].push(e); });
  function leaveOutUnfed() {
    for (let changed = true; changed;) {
      changed = false;
      for (let i = 0; i < n; i++) {
        if (kind[i] !== OP || rep[i] !== i || !intoNode[i].length) continue;
        if (intoNode[i].every(function (e) { return rep[E[e][0]] < 0; })) { rep[i] = -1; changed = true; }
      }
    }
  }
  // a parameter inside closed module c that a node drawn outside c reads (not inside another call
  // of c's module or of a module in it: a module called three times reads its parameters, made
  // in its first call, in each) is drawn as itself, beside c's box (P.lifted: c -> parameters),
  // as make_dot draws it (Projection.children)
  P.lifted = new Map();
  P.liftedAttrs = new Map();  // a parameter drawn beside a box -> its attributes there
  function liftParams(closedAt) {
    P.lifted = new Map();
    P.liftedAttrs = new Map();
    paramReaders.forEach(function (readers, i) {
      const c = closedAt[i];
      if (c < 0 || rep[i] >= 0) return;
      const path = S[paths[c]] || "";
      for (let j = 0; j < readers.length; j++) {
        const t = readers[j], r = rep[t];
        if (r < 0 || r === c || inModule(t, path)) continue;
        rep[i] = i; lvl[i] = 0;
        if (!P.lifted.has(c)) P.lifted.set(c, []);
        P.lifted.get(c).push(i);
        const a = besideAttrs.get(i).get(c);
        if (a !== undefined) P.liftedAttrs.set(i, a);
        return;
      }
    });
  }
  // whether node i ran inside a call of the module at ``path`` or of a module inside it
  function inModule(i, path) {
    if (!path) return true;
    for (let p = i; p >= 0; p = parent[p]) {
      if (paths[p] < 0) continue;
      const q = S[paths[p]];
      if (q === path || q.startsWith(path + ".")) return true;
    }
    return false;
  }

  function attrText(a) {
    const parts = A[a], out = [];
    for (let j = 0; j < 3; j++) { const s = S[parts[j]]; if (s) out.push(s); }
    return out.join(" ");
  }
  function foldedRun(i) {
    const k = runOfLead.get(i);
    return k !== undefined && P.folded[k] ? runs[k] : null;
  }

  // the DOT id of node i (of loop i - n's group, past n)
  function idOf(i) { return i < n ? S[N[i][2]] : loops[i - n].id; }
  // the DOT id of the node drawing the title of cluster i: make_dot's, "<id>::title"
  function titleId(i) {
    const id = idOf(i);
    return id.charAt(0) === '"' ? id.slice(0, -1) + '::title"' : '"' + id + '::title"';
  }
  Object.assign(P, { D, S, A, N, E, n, children, top, loops, loopOf, carriedEdges, info, rep, lvl, $,
    isOpen, resolve, attrText, foldedRun, idOf, titleId, parent, depth, runs, blockOf, laterIteration, view,
    canvas, T, LAYER, kind, canOpen, status, firstOpen, maxDepth, runOfLead, details });
})();
