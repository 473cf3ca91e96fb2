// torchrecorder's interactive view: rebuilds the DOT of the modules the reader opened and lays
// it out with Graphviz (viz.js).  Every name reaches the page as text: the data is JSON, labels
// come back from Graphviz as SVG text, and the detail panel is written with textContent.
(function () {
  "use strict";
  const D = JSON.parse(document.getElementById("tr-data").textContent);
  const S = D.strings, A = D.attrs, N = D.nodes, E = D.edges;
  const LAYER = 0, PARAM = 4;
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
    return { lead: r[0], members: r[1], alias: r[2], cross: r[3], box: r[4], cluster: r[5], title: r[6] };
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
  loops.forEach(function (r, k) {
    r.first.forEach(function (i) { loopOf[i] = k; });
    r.later.forEach(function (i) { loopOf[i] = k; laterIteration[i] = 1; });
    r.anchor = r.first.length ? r.first[0] : r.later[0];  // where the folded loop is drawn
  });
  const infos = new Array(n);
  function info(i) { if (infos[i] === undefined) infos[i] = JSON.parse(S[N[i][6]]); return infos[i]; }

  // ------------------------------------------------------------------ state
  let open = firstOpen.slice();
  let folded = runs.map(function () { return D.folded; });
  let loopFolded = loops.map(function () { return D.folded; });
  let rep = new Int32Array(n), lvl = new Int32Array(n);
  let selected = -1, hit = -1;

  const $ = function (id) { return document.getElementById(id); };
  const view = $("tr-view"), canvas = $("tr-canvas"), details = $("tr-details"), status = $("tr-status");
  const T = window.__tr = { ready: false, firstPaint: null, layouts: 0, lastLayoutMs: null, error: null, dot: "" };

  function isOpen(i) { return kind[i] === LAYER && canOpen[i] === 1 && open[i] === 1; }

  // which drawn node stands for each node: itself, the closed module holding it, its
  // counterpart in the first block of a folded run or the first iteration of a folded loop,
  // or nothing (-1)
  function resolve() {
    const alias = new Map();
    const hiddenEdges = new Set();
    loops.forEach(function (r, k) {
      if (!loopFolded[k]) {
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
      if (!folded[k]) return;
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
    return hiddenEdges;
  }

  function attrText(a) {
    const parts = A[a], out = [];
    for (let j = 0; j < 3; j++) { const s = S[parts[j]]; if (s) out.push(s); }
    return out.join(" ");
  }
  function foldedRun(i) {
    const k = runOfLead.get(i);
    return k !== undefined && folded[k] ? runs[k] : null;
  }

  // the DOT id of node i (of loop i - n's group, past n)
  function idOf(i) { return i < n ? S[N[i][2]] : loops[i - n].id; }
  // the DOT id of the node drawing the title of cluster i: make_dot's, "<id>::title"
  function titleId(i) {
    const id = idOf(i);
    return id.charAt(0) === '"' ? id.slice(0, -1) + '::title"' : '"' + id + '::title"';
  }
  // invisible edges that rank each title below what feeds its cluster and above the
  // cluster's first members (and a nested cluster's title), as make_dot writes them; inCluster
  // holds the cluster each drawn node and cluster is in (-1: none), inside the drawn members
  // of each cluster
  // (the ends of these edges are added to ``pairs`` too, a title as m + its cluster, as the
  // Python budget counts them (budget.layout_spans): every cluster's, one per edge into it)
  function titleEdges(drawn, titled, opened, inCluster, inside, out, pairs) {
    if (!opened.length) return;
    const seen = new Set(), fedInside = new Set(), m = n + loops.length;
    function clusters(i) { const a = []; for (let c = inCluster.get(i); c >= 0; c = inCluster.get(c)) a.push(c); return a; }
    function add(line) { if (line && !seen.has(line)) { seen.add(line); out.push(line); } }
    for (let j = 0; j < drawn.length; j++) {
      const a = drawn[j][0], b = drawn[j][1];
      const outer = new Set(clusters(a));
      let inner = b;
      const chain = clusters(b);
      for (let k = 0; k < chain.length; k++) {
        const c = chain[k];
        if (outer.has(c)) { fedInside.add(c * m + inner); break; }  // the innermost holding both ends
        pairs.push(a, m + c);
        if (titled.has(c)) add("\t" + S[N[a][2]] + " -> " + titleId(c) + " [style=invis]");
        inner = c;
      }
    }
    for (let j = 0; j < opened.length; j++) {
      const c = opened[j];
      const kids = inside.get(c);
      for (let k = 0; k < kids.length; k++) {
        const kid = kids[k];
        if (fedInside.has(c * m + kid)) continue;
        const opens = inside.has(kid);
        pairs.push(m + c, opens ? m + kid : kid);
        if (!titled.has(c) || (opens && !titled.has(kid))) continue;
        add("\t" + titleId(c) + " -> " + (opens ? titleId(kid) : S[N[kid][2]]) + " [style=invis]");
      }
    }
  }
  // the children of an open cluster (or of the top level) as drawn: a folded loop's children
  // give way to the loop, drawn where its first child is
  function drawnKids(kids) {
    const out = [];
    for (let j = 0; j < kids.length; j++) {
      const kid = kids[j], k = loopOf[kid];
      if (k < 0 || !loopFolded[k]) out.push(kid);
      else if (kid === loops[k].anchor) out.push(n + k);
    }
    return out;
  }
  // the cluster's lines: its attributes, and the node drawing its title (NUL between them)
  // the colouring chosen in the menu: fill (boxes) or border (clusters) of node i, "" if none
  let colourBy = "";
  function paint(i, fill) {
    const c = colourBy && D.colour[colourBy].fill[i];
    if (!c) return "";
    return fill ? ' fillcolor="' + c[0] + '"' + (c[1] ? " fontcolor=white" : "") : ' color="' + c[0] + '" penwidth=2.5';
  }
  function openCluster(i, text, ind, titled, out) {
    const parts = text.split("\u0000");
    out.push(ind + "subgraph cluster_" + i + " {");
    out.push(ind + "\t" + parts[parts.length - 1] + (i < n ? paint(i, false) : "") + ' id="c' + i + '"');
    if (parts.length > 1) {
      titled.add(i);
      out.push(ind + "\t" + titleId(i) + " [" + parts[0] + ' id="t' + i + '"]');
    }
  }

  // an edge row's attributes as drawn from the boxes its ends are shown at
  function edgeAttrs(row) {
    const v = row[2 + Math.min(lvl[row[0]], row.length - 3)];
    return typeof v === "number" ? v : v[Math.min(lvl[row[1]], v.length - 1)];
  }

  // the DOT of the current state; its measures (as the Python budget counts them: boxes and
  // clusters, edges, and the ranks the edges and the title edges pass) in ``measured``
  let measured = { nodes: 0, edges: 0, spans: 0 };
  function buildDot() {
    const hiddenEdges = resolve();
    const out = [D.header], titled = new Set(), opened = [];
    let boxes = 0;
    if (colourBy) out.push("\tgraph [label=" + D.colour[colourBy].legend + " labelloc=b]");
    const inCluster = new Map(), inside = new Map();
    // depth first with an explicit stack (no recursion: any nesting depth) of [what, indent,
    // the cluster it is in]; -1 closes a cluster, n + k opens the cluster of loop k
    const todo = [];
    function push(kids, ind, c) { for (let j = kids.length - 1; j >= 0; j--) todo.push([kids[j], ind, c]); }
    push(drawnKids(top), "\t", -1);
    while (todo.length) {
      const [i, ind, c] = todo.pop();
      if (i === -1) { out.push(ind + "}"); continue; }
      if (i < n && rep[i] !== i) continue;
      inCluster.set(i, c);
      if (c >= 0) inside.get(c).push(i);
      if (i >= n) {  // a folded loop: the children of its first iteration
        openCluster(i, S[loops[i - n].cluster], ind, titled, out);
        opened.push(i); inside.set(i, []);
        todo.push([-1, ind, -1]);
        push(loops[i - n].first, ind + "\t", i);
        continue;
      }
      const run = foldedRun(i);
      if (isOpen(i)) {
        openCluster(i, run && run.cluster >= 0 ? S[run.cluster] : S[N[i][4]], ind, titled, out);
        opened.push(i); inside.set(i, []);
        todo.push([-1, ind, -1]);
        push(drawnKids(children[i]), ind + "\t", i);
      } else {
        out.push(ind + S[N[i][2]] + " [" + attrText(run ? run.box : N[i][3]) + paint(i, true) + ' id="n' + i + '"]');
        boxes += 1;
      }
    }
    const seen = new Set(), degree = new Map(), back = [];
    let drawn = [];
    for (let e = 0; e < E.length; e++) {
      const row = E[e], a = rep[row[0]], b = rep[row[1]];
      if (a < 0 || b < 0 || a === b || hiddenEdges.has(e)) continue;
      if (carriedEdges.has(e)) { back.push(e); continue; }
      const key = a * n + b;
      if (seen.has(key)) continue;
      seen.add(key);
      drawn.push([a, b, edgeAttrs(row)]);
      degree.set(a, (degree.get(a) || 0) + 1);
    }
    // (while the budget shares them: the edges of a node feeding more than D.fanout boxes
    // drawn as one edge to a mark "→ N", the boxes named in its tooltip)
    const marks = shareFanout ? shareWide(drawn, degree, out) : [];
    if (marks.length) drawn = drawn.filter(function (d) { return !(degree.get(d[0]) > D.fanout); });
    for (let j = 0; j < drawn.length; j++) {
      const d = drawn[j], wide = degree.get(d[0]) > D.fanout;
      if (!wide && pathEdge(d, j, titled, inCluster, out)) continue;
      let text = attrText(d[2]);
      if (wide && !/(^|\s)constraint=/.test(text)) text += " constraint=false";
      out.push("\t" + S[N[d[0]][2]] + " -> " + S[N[d[1]][2]] + " [" + text + "]");
    }
    const pairs = [];
    for (let j = 0; j < drawn.length; j++) pairs.push(drawn[j][0], drawn[j][1]);
    for (let j = 0; j < marks.length; j++) pairs.push(marks[j], 2 * (n + loops.length) + marks[j]);
    const plain = spans(pairs);  // (the larger of the two estimates counts, as in Python)
    titleEdges(drawn, titled, opened, inCluster, inside, out, pairs);
    const backSeen = new Set();
    back.forEach(function (e) {  // carried edges, as make_dot draws them: after the others, once
      const row = E[e], a = rep[row[0]], b = rep[row[1]], key = a * n + b;
      if (seen.has(key) || backSeen.has(key)) return;
      backSeen.add(key);
      out.push("\t" + S[N[a][2]] + " -> " + S[N[b][2]] + " [" + attrText(edgeAttrs(row)) + "]");
    });
    measured = { nodes: boxes + opened.length + marks.length, edges: drawn.length + marks.length + backSeen.size,
                 spans: Math.max(plain, spans(pairs)), shared: marks };
    for (const role of ["input", "output"]) {
      const ids = top.filter(function (i) { return rep[i] === i && info(i).kind === role; })
        .map(function (i) { return S[N[i][2]]; });
      if (ids.length) out.push("\t{rank=" + (role === "input" ? "source" : "sink") + "; " + ids.join("; ") + "}");
      // flat invisible edges keep them left to right in the model's order
      for (let j = 1; j < ids.length; j++) out.push("\t" + ids[j - 1] + " -> " + ids[j] + " [style=invis]");
    }
    out.push("}");
    return out.join("\n") + "\n";
  }

  // the clusters around drawn node or cluster i, innermost first
  function around(i, inCluster) { const a = []; for (let c = inCluster.get(i); c >= 0; c = inCluster.get(c)) a.push(c); return a; }
  // the name a DOT id stands for, as written inside quotes
  function bare(id) { return id.charAt(0) === '"' ? id.slice(1, -1) : id; }
  // ``text`` inside the (reopened) clusters ``chain``, outermost first
  function inClusters(chain, text) {
    return chain.map(function (c) { return "subgraph cluster_" + c + " { "; }).join("") + text + " }".repeat(chain.length);
  }
  // drawn edge d written to ``out`` as make_dot writes it (renderer/_edge_paths.py): a chain of
  // edges through its label, a node of its own ("a -> b::label") in the innermost cluster
  // holding both ends, and through a point ("a -> b::via1", ...) on the title rank of each
  // titled cluster it enters, inside it; only the last part has an arrowhead.  The data
  // carries the attributes of the label node ("": none) and of the points for each edge
  // make_dot may draw so; false (nothing written) for the others and where there is neither.
  // Their SVG ids: "l<j>" and "v<j>_<k>" (j: the edge's place in ``drawn``), never a module's.
  // (The budget counts none of these nodes, as projection/budget.py does not.)
  function pathEdge(d, j, titled, inCluster, out) {
    const parts = A[d[2]];
    if (parts.length < 5) return false;
    const from = around(d[0], inCluster), to = around(d[1], inCluster);
    const fromSet = new Set(from), toSet = new Set(to);
    const common = from.filter(function (c) { return toSet.has(c); }).reverse();
    let entered = to.filter(function (c) { return !fromSet.has(c) && titled.has(c); }).reverse();
    if (entered.length > D.titles_entered) entered = [];
    const label = S[parts[3]];
    if (!label && !entered.length) return false;
    const a = S[N[d[0]][2]], b = S[N[d[1]][2]], name = bare(a) + " -> " + bare(b), path = [], via = new Set();
    if (label) {
      const id = '"' + name + '::label"';
      out.push("\t" + inClusters(common, id + " [" + label + ' id="l' + j + '"]'));
      path.push(id);
    }
    if (entered.length) {
      const point = S[parts[4]];
      let inner = "";  // each point in its cluster, nested in the one before
      for (let k = entered.length; k >= 1; k--) {
        const vid = '"' + name + "::via" + k + '" [' + point + ' id="v' + j + "_" + k + '"] ';
        inner = inClusters([entered[k - 1]], (vid + inner).trim());
      }
      out.push("\t" + inClusters(common, inner));
      for (let k = 1; k <= entered.length; k++) { path.push('"' + name + "::via" + k + '"'); via.add(path[path.length - 1]); }
    }
    const text = label ? [S[parts[1]], S[parts[2]]].filter(Boolean).join(" ") : attrText(d[2]);
    const ends = [a].concat(path, [b]);
    for (let k = 1; k < ends.length; k++) {
      // the parts meet at a point's centre (clipped at its tiny border they would leave a gap)
      let part = text + (k < ends.length - 1 ? " arrowhead=none" : "");
      if (via.has(ends[k - 1])) part += " tailclip=false";
      if (via.has(ends[k])) part += " headclip=false";
      out.push("\t" + ends[k - 1] + " -> " + ends[k] + " [" + part.trim() + "]");
    }
    return true;
  }

  // the marks of the nodes whose edges the budget shares (see buildDot): one node "→ N" and
  // one edge to it per node feeding more than D.fanout boxes, written to ``out``; their sources
  let shareFanout = false;
  function shareWide(drawn, degree, out) {
    const targets = new Map();
    for (let j = 0; j < drawn.length; j++) {
      const d = drawn[j];
      if (!(degree.get(d[0]) > D.fanout)) continue;
      if (!targets.has(d[0])) targets.set(d[0], { attrs: d[2], to: [] });
      targets.get(d[0]).to.push(d[1]);
    }
    const sources = [];
    targets.forEach(function (t, a) {
      const id = idOf(a), mark = id.charAt(0) === '"' ? id.slice(0, -1) + '::fanout"' : '"' + id + '::fanout"';
      const names = t.to.slice(0, 12).map(function (b) { const d = info(b); return d.path || d.name || d.kind; });
      const tip = ("to " + t.to.length + ": " + names.join(", ") + (t.to.length > 12 ? ", …" : ""))
        .replace(/[\\"]/g, "\\$&").replace(/[\r\n]+/g, " ");
      // named by what it feeds: "→ 32 × self_attn" where every box has the same last name
      const last = names.map(function (x) { return String(x).split(".").pop(); });
      const what = t.to.length <= 12 && last.every(function (x) { return x === last[0]; }) ? last[0] :
        t.to.length > 12 && last.every(function (x) { return x === last[0]; }) && t.to.slice(12).every(function (b) {
          return String(info(b).path || info(b).name || "").split(".").pop() === last[0]; }) ? last[0] : "boxes";
      const label = ("→ " + t.to.length + (what === "boxes" ? " boxes" : " × " + what)).replace(/[\\"]/g, "\\$&");
      out.push("\t" + mark + ' [shape=plain fontsize=10 label="' + label + '" tooltip="' + tip + '" id="f' + a + '"]');
      out.push("\t" + S[N[a][2]] + " -> " + mark + " [" + attrText(t.attrs) + "]");
      sources.push(a);
    });
    return sources;
  }
  // the ranks the edges (a flat list of ends: a0, b0, a1, b1, ...) pass without stopping, as
  // the Python budget counts them (projection/budget.py's _spans): each node one rank below its
  // lowest predecessor, a node without one just above its first consumer
  function spans(pairs) {
    const succ = new Map(), indegree = new Map();
    for (let j = 0; j < pairs.length; j += 2) {
      const a = pairs[j], b = pairs[j + 1];
      if (!succ.has(a)) succ.set(a, []);
      succ.get(a).push(b);
      indegree.set(b, (indegree.get(b) || 0) + 1);
      if (!indegree.has(a)) indegree.set(a, 0);
    }
    const rank = new Map(), sources = [];
    indegree.forEach(function (d, k) { rank.set(k, 0); if (d === 0) sources.push(k); });
    const order = sources.slice(), ranked = new Set();
    for (let q = 0; q < order.length; q++) {
      const k = order[q], r = rank.get(k) + 1, next = succ.get(k) || [];
      ranked.add(k);
      for (let j = 0; j < next.length; j++) {
        const b = next[j];
        if (rank.get(b) < r) rank.set(b, r);
        const d = indegree.get(b) - 1;
        indegree.set(b, d);
        if (d === 0) order.push(b);
      }
    }
    sources.forEach(function (k) {
      let low = Infinity;
      (succ.get(k) || []).forEach(function (b) { if (ranked.has(b)) low = Math.min(low, rank.get(b)); });
      if (low < Infinity) rank.set(k, low - 1);
    });
    let total = 0;
    for (let j = 0; j < pairs.length; j += 2) {
      const a = pairs[j], b = pairs[j + 1];
      if (!ranked.has(a) || !ranked.has(b)) continue;
      const d = rank.get(b) - rank.get(a);
      if (d > 1) total += d - 1;
    }
    return total;
  }

  // -------------------------------------------------------------- pan/zoom
  let tx = 0, ty = 0, scale = 1;
  function applyTransform() {
    T.scale = scale;
    canvas.style.transform = "translate(" + tx + "px," + ty + "px) scale(" + scale + ")";
  }
  function svgSize() {
    const svg = canvas.querySelector("svg");
    if (!svg) return [1, 1];
    const r = svg.getBoundingClientRect();
    return [r.width / scale, r.height / scale];
  }
  function fit() {
    const size = svgSize(), w = view.clientWidth, h = view.clientHeight;
    // the whole drawing in the window, enlarged up to twice its size if it is small
    scale = Math.min(2, (w - 20) / size[0], (h - 20) / size[1]);
    if (!(scale > 0)) scale = 1;
    tx = Math.max(10, (w - size[0] * scale) / 2); ty = Math.max(10, (h - size[1] * scale) / 2);
    applyTransform();
  }
  // until the reader zooms or pans, the first view stays fitted when the window (or the
  // notebook cell, or the tool bar wrapping onto two lines) changes size
  let autoFit = true;
  if (window.ResizeObserver) {
    new ResizeObserver(function () { if (autoFit && T.firstPaint !== null) fit(); }).observe(view);
  }
  function zoomAt(factor, cx, cy) {
    autoFit = false;
    const s = Math.min(8, Math.max(0.02, scale * factor));
    tx = cx - (cx - tx) * (s / scale); ty = cy - (cy - ty) * (s / scale); scale = s;
    applyTransform();
  }
  view.addEventListener("wheel", function (ev) {
    ev.preventDefault();
    const r = view.getBoundingClientRect();
    zoomAt(Math.exp(-ev.deltaY * 0.0015), ev.clientX - r.left, ev.clientY - r.top);
  }, { passive: false });
  let drag = null;
  view.addEventListener("pointerdown", function (ev) {
    if (ev.button !== 0) return;
    drag = { x: ev.clientX, y: ev.clientY, tx: tx, ty: ty, moved: false };
  });
  window.addEventListener("pointermove", function (ev) {
    if (!drag) return;
    const dx = ev.clientX - drag.x, dy = ev.clientY - drag.y;
    if (!drag.moved && Math.abs(dx) + Math.abs(dy) > 4) { drag.moved = true; view.classList.add("tr-dragging"); }
    if (drag.moved) { autoFit = false; tx = drag.tx + dx; ty = drag.ty + dy; applyTransform(); }
  });
  window.addEventListener("pointerup", function () {
    if (drag && drag.moved) setTimeout(function () { drag = null; }, 0); else drag = null;
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
    tx += w / 2 - (x0 + r.width / 2);
    ty += r.height < h - 20 ? h / 2 - (y0 + r.height / 2) : 10 - y0;
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
  function snapshot() { return { open: open.slice(), folded: folded.slice(), loopFolded: loopFolded.slice() }; }
  function restore(s) { open = s.open.slice(); folded = s.folded.slice(); loopFolded = s.loopFolded.slice(); }
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
    shareFanout = false;
    let dot = buildDot();
    if (job.force || fits(measured)) return { dot: dot, note: "" };
    const asked = measured, did = [];
    shareFanout = true;  // first: the edges of a value fed to many boxes drawn once
    dot = buildDot();
    let foldedAll = false, collapsed = false, spared = false, reached = 0;
    function foldAll() {
      if (foldedAll || (folded.every(function (f) { return f; }) && loopFolded.every(function (f) { return f; }))) return;
      foldedAll = true;
      const was = folded.join() + "/" + loopFolded.join();
      folded = runs.map(function () { return true; });
      loopFolded = loops.map(function () { return true; });
      if (job.keep >= 0 && job.keep < n) unfoldFor(job.keep);
      if (folded.join() + "/" + loopFolded.join() === was) return;  // (those it holds only)
      dot = buildDot();
      did.push("every repeated run and loop folded" + but(job.keep));
    }
    function collapse() {
      for (let pass = 0; pass < 2 && !fits(measured); pass++) {
        const spare = pass === 0 && job.keep >= 0 && job.keep < n;
        for (let d = openDepth() - 1; d >= 0 && !fits(measured); d--) {
          let closed = false;
          for (let i = 0; i < n; i++) {
            if (isOpen(i) && depth[i] >= d && !(spare && holds(i, job.keep))) { open[i] = 0; closed = true; }
          }
          if (closed) { dot = buildDot(); collapsed = true; spared = spare; reached = d; }
        }
      }
    }
    if (job.mayFold) foldAll();
    collapse();
    if (!fits(measured)) { foldAll(); collapse(); }
    if (collapsed) {
      did.push("modules deeper than depth " + reached + " collapsed" + (spared ? but(job.keep) : ""));
    }
    if (measured.shared.length) {
      did.unshift("the edges of " + measured.shared.map(function (a) {
        const d = info(a);
        return d.kind === "module" || !d.path ? d.path || d.name : d.name + " in " + d.path;
      }).join(", ") +
                  " to the boxes each feeds drawn as one (→ N)");
    }
    const note = (did.join(" and ") || "folded") + " to keep the drawing to " + sizeText(measured) +
      " (budget " + B.nodes.toLocaleString("en-US") + " / " + B.edges.toLocaleString("en-US") + "; asked for: " +
      sizeText(asked) + "). Drawing it all may take minutes.";
    return { dot: dot, note: note };
  }
  function but(keep) { return keep >= 0 && keep < n ? " (but those holding " + (info(keep).path || info(keep).name) + ")" : ""; }
  // the runs and loops that must be unfolded for node i to be drawn
  function unfoldFor(i) {
    for (let c = i; c >= 0; c = parent[c]) {
      const b = blockOf.get(c);
      if (b && b[1] > 0) folded[b[0]] = false;
      if (laterIteration[c]) loopFolded[loopOf[c]] = false;
    }
  }
  const note = $("tr-note"), noteText = $("tr-note-text"), anyway = $("tr-anyway");
  const busyBox = $("tr-busy"), busyText = $("tr-busy-text"), cancel = $("tr-cancel");
  let asked = null;  // the state the budget reduced, drawn by "Draw it all"
  function showNote(text, error) {
    noteText.textContent = text;
    note.hidden = !text;
    note.classList.toggle("tr-error", !!error);
    anyway.hidden = !asked;
  }
  anyway.addEventListener("click", function () {
    if (!asked) return;
    restore(asked); asked = null;
    layout(anchorOfSelection(), null, { force: true });
  });

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
    const engine = {
      worker: true,
      render: function (dot, fn) { reply = fn; jobs += 1; worker.postMessage({ id: jobs, dot: dot }); },
      stop: function () { reply = null; worker.terminate(); },
    };
    worker.onmessage = function (ev) {
      const m = ev.data;
      if (m.ready !== undefined) {
        if (started) return;
        started = true;
        if (m.ready) done(engine); else { worker.terminate(); mainThreadEngine(done); }
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
  let engine = null, pending = null, busy = false, shownState = null, current = null;
  function setStatus(text, error) { status.textContent = text; status.classList.toggle("tr-error", !!error); }
  // lay the view out again (now, or after the layout under way); the module ``anchor`` stays
  // where it is on screen; ``then`` runs once the new drawing is on screen (a layout asked
  // for meanwhile takes the place of this one, and its callbacks with it); ``how``: keep (the
  // node the budget keeps in view; the anchor by default), mayFold (whether the budget may
  // fold runs and loops again: false where the reader unfolded them), force (no budget)
  function layout(anchor, then, how) {
    const calls = pending ? pending.then : [];
    if (then) calls.push(then);
    anchor = anchor === undefined ? -1 : anchor;
    how = how || {};
    pending = { anchor: anchor, then: calls, keep: how.keep !== undefined ? how.keep : anchor,
                mayFold: how.mayFold !== false, force: !!how.force };
    if (!busy && engine) run();
  }
  function run() {
    busy = true;
    const job = pending; pending = null;
    const t0 = performance.now();
    let before = null;
    if (job.anchor >= 0) { const el = elementOf(job.anchor); if (el) before = topMiddle(el); }
    const wanted = snapshot();
    const got = fitted(job);
    T.error = null;  // (the error of the last layout, if it failed)
    asked = got.note ? wanted : null;
    T.dot = got.dot;
    T.measured = measured;
    current = job;
    // (shown over the drawing: the tool bar keeps its size, the drawing its place)
    busyText.textContent = "laying out " + measured.nodes.toLocaleString("en-US") + " nodes…";
    busyBox.hidden = false;
    engine.render(got.dot, function (error, text) {
      if (current !== job) return;  // cancelled
      current = null;
      busyBox.hidden = true;
      let svg = null;
      if (!error) {
        svg = new DOMParser().parseFromString(text, "image/svg+xml").documentElement;
        if (!svg || svg.nodeName !== "svg") error = "Graphviz returned no drawing";
      }
      if (error) { failed(job, error); return; }
      canvas.replaceChildren(svg);
      decorate(svg);
      shownState = snapshot();
      if (T.firstPaint === null) { T.firstPaint = performance.now(); fit(); before = null; }
      if (before) { const el = elementOf(job.anchor); if (el) { const after = topMiddle(el); tx += before[0] - after[0]; ty += before[1] - after[1]; applyTransform(); } }
      T.lastLayoutMs = performance.now() - t0;
      T.layouts += 1;
      const shown = canvas.querySelectorAll("g.node:not([id^=l]):not([id^=v])").length;  // (not labels, points)
      setStatus(shown + " nodes · laid out in " + Math.round(T.lastLayoutMs) + " ms");
      showNote(got.note ? "Drawn with " + got.note : "");
      syncControls();
      if (selected >= 0) showDetails(selected);
      busy = false;
      if (pending) { pending.then = job.then.concat(pending.then); setTimeout(run, 0); return; }
      job.then.forEach(function (fn) { fn(); });
    });
  }
  // the layout failed or was cancelled: a fresh engine, the view drawn before kept (its state
  // back), what happened said
  function failed(job, error, cancelled) {
    T.error = cancelled ? null : error;
    T.failures = (T.failures || 0) + (cancelled ? 0 : 1);
    current = null; pending = null; busy = true; asked = null;
    busyBox.hidden = true;
    if (shownState) restore(shownState);
    syncControls();
    if (selected >= 0) showDetails(selected);
    const old = engine;
    engine = null;
    old.stop();
    const text = cancelled ? "Layout cancelled; the view before it is kept." :
      "Graphviz could not lay out this view (" + error + "); the view before it is kept.";
    setStatus(cancelled ? "cancelled" : "layout failed", !cancelled);
    showNote(text, !cancelled);
    newEngine(function (e) { engine = e; busy = false; if (pending) run(); });
  }
  cancel.addEventListener("click", function () { if (current) failed(current, "", true); });
  function decorate(svg) {
    svg.querySelectorAll("g.node, g.cluster").forEach(function (g) {
      const i = Number(g.id.slice(1));
      if (g.classList.contains("node") && isLayerThatOpens(i)) g.classList.add("tr-can-open");
    });
    // tooltips: Graphviz's <title> holds the DOT id; the detail panel says more
    svg.querySelectorAll("g.node > title, g.cluster > title").forEach(function (t) { t.remove(); });
    mark();
  }
  function isLayerThatOpens(i) { return kind[i] === LAYER && canOpen[i] === 1; }
  function mark() {
    canvas.querySelectorAll(".tr-sel, .tr-hit").forEach(function (g) { g.classList.remove("tr-sel", "tr-hit"); });
    if (selected >= 0) { const el = elementOf(selected); if (el) el.classList.add("tr-sel"); }
    if (hit >= 0) { const el = elementOf(hit); if (el) el.classList.add("tr-hit"); }
  }

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
    actions.appendChild(loopButton(k, (loopFolded[k] ? "Show the " : "Fold the ") + r.count + " iterations"));
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
    parts.push(el("h2", d.path || d.name));
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
      const b = el("button", folded[k] ? "Show the " + run.members.length + " blocks" : "Fold the " + run.members.length + " blocks");
      b.type = "button"; b.dataset.action = "fold";
      b.addEventListener("click", function () { folded[k] = !folded[k]; select(i); layout(i, null, { mayFold: folded[k] }); });
      actions.appendChild(b);
    }
    const k = loopAround(i);
    if (k >= 0) actions.appendChild(loopButton(k, (loopFolded[k] ? "Show the " : "Fold the ") + loops[k].count + " iterations of its loop"));
    if (actions.childNodes.length) parts.push(actions);
    if (run && folded[runOfLead.get(i)]) parts.push(el("p", run.members.length + " identical blocks: " + run.title));
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
    } else {
      parts.push.apply(parts, list("shape", [d.shape + " " + d.dtype]));
      if (d.device) parts.push(el("p", "on " + d.device));
      if (d.count !== undefined) parts.push(el("p", d.count.toLocaleString("en-US") + " elements"));
    }
    details.replaceChildren.apply(details, parts);
  }
  function select(i) { selected = i; showDetails(i); mark(); }

  // --------------------------------------------------------------- actions
  function toggle(i) {
    if (!isLayerThatOpens(i)) return;
    open[i] = open[i] ? 0 : 1;
    select(i);
    layout(i);
  }
  // fold or unfold loop k; its first child stays where it is on screen
  function toggleLoop(k) {
    loopFolded[k] = !loopFolded[k];
    const r = loops[k];
    if (selected < n) showDetails(selected); else select(n + k);
    layout(r.first.length ? r.first[0] : -1, null, { mayFold: loopFolded[k] });
  }
  canvas.addEventListener("click", function (ev) {
    if (drag && drag.moved) return;
    const g = ev.target.closest("g.node, g.cluster");
    if (!g || !/^[nct]\d+$/.test(g.id)) return;
    const i = Number(g.id.slice(1));
    if (i >= n) { select(i); toggleLoop(i - n); } else if (isLayerThatOpens(i)) toggle(i); else select(i);
  });
  canvas.addEventListener("mouseover", function (ev) {
    const g = ev.target.closest("g.node, g.cluster");
    if (g && /^[nct]\d+$/.test(g.id)) showDetails(Number(g.id.slice(1)));
  });
  canvas.addEventListener("mouseout", function (ev) {
    const to = ev.relatedTarget && ev.relatedTarget.closest ? ev.relatedTarget.closest("g.node, g.cluster") : null;
    if (!to) showDetails(selected);
  });

  function setDepth(d) {
    for (let i = 0; i < n; i++) open[i] = canOpen[i] && depth[i] < d ? 1 : 0;
  }
  // the selected module (the one clicked last) stays where it is on screen, if it is drawn
  function anchorOfSelection() { return selected >= 0 && selected < n && elementOf(selected) ? selected : -1; }
  $("tr-expand-all").addEventListener("click", function () { open = canOpen.slice(); layout(anchorOfSelection()); });
  // Collapse all and Reset end a layout under way first: they get the reader out of a view
  // that takes long
  function stopLayout() { if (current) failed(current, "", true); }
  $("tr-collapse-all").addEventListener("click", function () { stopLayout(); setDepth(1); hit = -1; layout(anchorOfSelection()); });
  const depthInput = $("tr-depth");
  depthInput.max = String(maxDepth);
  depthInput.addEventListener("change", function () {
    const d = Math.max(0, Math.min(maxDepth, parseInt(depthInput.value, 10) || 0));
    setDepth(d); layout();
  });
  const foldBox = $("tr-fold");
  if (!runs.length && !loops.length) $("tr-fold-label").style.display = "none";
  foldBox.addEventListener("change", function () {
    folded = runs.map(function () { return foldBox.checked; });
    loopFolded = loops.map(function () { return foldBox.checked; });
    if (selected >= 0) showDetails(selected);
    layout(-1, null, { mayFold: foldBox.checked });
  });
  const colourMenu = $("tr-colour");
  if (!D.colour) $("tr-colour-label").style.display = "none";
  else Object.keys(D.colour).forEach(function (stat) {
    const o = document.createElement("option");
    o.value = stat; o.textContent = D.colour[stat].title; colourMenu.appendChild(o);
  });
  colourMenu.addEventListener("change", function () { colourBy = colourMenu.value; layout(); });
  function syncControls() {
    let d = 0;
    for (let i = 0; i < n; i++) if (isOpen(i) && depth[i] + 1 > d) d = depth[i] + 1;
    if (document.activeElement !== depthInput) depthInput.value = String(d);
    const all = folded.concat(loopFolded);
    foldBox.checked = all.length > 0 && all.every(function (f) { return f; });
    foldBox.indeterminate = !foldBox.checked && all.some(function (f) { return f; });
  }
  $("tr-fit").addEventListener("click", function () { autoFit = true; fit(); });
  $("tr-reset").addEventListener("click", function () {
    stopLayout();
    open = firstOpen.slice(); folded = runs.map(function () { return D.folded; }); hit = -1;
    loopFolded = loops.map(function () { return D.folded; });
    pending = null;
    layout(-1, function () { autoFit = true; fit(); });
  });

  // search: the modules whose name or path holds the text; Enter goes to the next
  const search = $("tr-search"), found = $("tr-found");
  let matches = [], at = -1, lastQuery = "";
  function findAll(q) {
    const out = [];
    q = q.toLowerCase();
    for (let i = 0; i < n; i++) {
      if (kind[i] !== LAYER) continue;
      const d = info(i);
      if ((d.path || "").toLowerCase().indexOf(q) >= 0 || (d.name || "").toLowerCase().indexOf(q) >= 0) out.push(i);
    }
    return out;
  }
  function reveal(i) {
    for (let a = parent[i], c = i; a >= 0; c = a, a = parent[a]) {
      if (canOpen[a]) open[a] = 1;
      const b = blockOf.get(c);
      if (b && b[1] > 0) folded[b[0]] = false;
    }
    const b = blockOf.get(i);
    if (b && b[1] > 0) folded[b[0]] = false;
    for (let c = i; c >= 0; c = parent[c]) if (laterIteration[c]) loopFolded[loopOf[c]] = false;
  }
  function goTo(q) {
    if (q !== lastQuery) { matches = q ? findAll(q) : []; at = -1; lastQuery = q; }
    if (!matches.length) { found.textContent = q ? "no match" : ""; hit = -1; mark(); return; }
    at = (at + 1) % matches.length;
    hit = matches[at];
    found.textContent = (at + 1) + " of " + matches.length;
    reveal(hit);
    select(hit);
    const target = hit;  // this search's hit, whatever the next search finds meanwhile
    layout(-1, function () { const e = elementOf(target); if (e && hit === target) bringIntoView(e); }, { keep: target });
  }
  search.addEventListener("keydown", function (ev) {
    if (ev.key === "Enter") { ev.preventDefault(); goTo(search.value.trim()); }
    if (ev.key === "Escape") { search.value = ""; lastQuery = ""; matches = []; hit = -1; found.textContent = ""; mark(); }
  });

  // downloads: exactly the view on screen, as SVG text or a PNG drawn from it
  function svgText() {
    const svg = canvas.querySelector("svg");
    if (!svg) return null;
    const copy = svg.cloneNode(true);
    copy.querySelectorAll(".tr-sel, .tr-hit, .tr-can-open").forEach(function (g) { g.classList.remove("tr-sel", "tr-hit", "tr-can-open"); });
    copy.setAttribute("xmlns", "http://www.w3.org/2000/svg");
    return '<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n' + new XMLSerializer().serializeToString(copy);
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
    engine = e;
    T.worker = e.worker;
    layout();
    T.ready = true;
  });
})();
