// torchrecorder's interactive view, part 2 of 5 (page_dot.js): the DOT of the current state:
// clusters, boxes, edges (labels as nodes, as make_dot draws them), the marks of shared edges and
// the measures the budget counts.
(function (P) {
  "use strict";
  const { D, S, A, N, E, n, children, top, loops, loopOf, carriedEdges, info, rep, lvl, $, isOpen, resolve,
    attrText, foldedRun, idOf, titleId } = P;
  // edge row -> the modules its value passed through unseen in the finest drawing
  const through = new Map();
  (D.through || []).forEach(function (r) { through.set(r[0], r.slice(1)); });
  // edge rows out of a module holding a constant (nothing feeds it): drawn only while that
  // module is not drawn open, its box standing for the constant, and into a module only
  // while that one is not drawn open either (see _html_made.py)
  const made = new Set(D.made || []);
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
      if (k < 0 || !P.loopFolded[k]) out.push(kid);
      else if (kid === loops[k].anchor) out.push(n + k);
    }
    return out;
  }
  // the cluster's lines: its attributes, and the node drawing its title (NUL between them)
  // the colouring chosen in the menu: fill (boxes) or border (clusters) of node i, "" if none
  P.colourBy = "";
  function paint(i, fill) {
    const c = P.colourBy && D.colour[P.colourBy].fill[i];
    if (!c) return "";
    return fill ? ' fillcolor="' + c[0] + '" fontcolor="' + c[1] + '"' : ' color="' + c[0] + '" penwidth=2.5';
  }
  // the attributes of box i, its grey second lines (type, parameter count: COLOR="#555555",
  // "#666666") recoloured where the colouring's fill would swallow them (as the Python
  // styler's text_colours decides)
  function boxAttrs(i, a) {
    const text = attrText(a), c = P.colourBy && D.colour[P.colourBy].fill[i];
    if (!c || !c[2]) return text;
    return text.split('COLOR="#555555"').join('COLOR="' + c[2] + '"').split('COLOR="#666666"').join('COLOR="' + c[2] + '"');
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
  P.measured = { nodes: 0, edges: 0, spans: 0 };
  P.rankWide = false;  // whether a node feeding more than D.fanout boxes ranks them (page_view.js)
  function buildDot() {
    const hiddenEdges = resolve();
    const out = [D.header], titled = new Set(), opened = [];
    let boxes = 0;
    if (P.colourBy) out.push("\tgraph [label=" + D.colour[P.colourBy].legend + " labelloc=b]");
    const inCluster = new Map(), inside = new Map();
    // depth first with an explicit stack (no recursion: any nesting depth) of [what, indent,
    // the cluster it is in]; -1 closes a cluster, n + k opens the cluster of loop k
    const todo = [];
    function push(kids, ind, c) {
      for (let j = kids.length - 1; j >= 0; j--) {
        todo.push([kids[j], ind, c]);
        const beside = P.lifted.get(kids[j]);  // parameters drawn beside the box, before it
        if (beside) for (let k = beside.length - 1; k >= 0; k--) todo.push([beside[k], ind, c]);
      }
    }
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
        out.push(ind + S[N[i][2]] + " [" + boxAttrs(i, run ? run.box : (P.liftedAttrs.get(i) ?? N[i][3])) + paint(i, true) + ' id="n' + i + '"]');
        boxes += 1;
      }
    }
    const seen = new Set(), degree = new Map(), back = [];
    let drawn = [];
    function add(a, b, row) {
      const key = a * n + b;
      if (seen.has(key)) return;
      seen.add(key);
      drawn.push([a, b, edgeAttrs(row)]);
      degree.set(a, (degree.get(a) || 0) + 1);
    }
    for (let e = 0; e < E.length; e++) {
      const row = E[e], a = rep[row[0]], b = rep[row[1]];
      if (a < 0 || b < 0 || a === b || hiddenEdges.has(e)) continue;
      if (made.has(e) && ((a === row[0] && isOpen(a)) || (b === row[1] && isOpen(b)))) continue;
      if (carriedEdges.has(e)) { back.push(e); continue; }
      const past = through.get(e);
      if (!past) { add(a, b, row); continue; }
      // the edge runs through the box of each closed module that only passed its value on
      // (make_dot draws the value into that box and out of it; see _html_through.py)
      let from = a;
      for (let k = 0; k < past.length; k++) {
        const m = past[k], box = rep[m] === m && isOpen(m) ? -1 : rep[m];
        if (box < 0 || box === from || box === b) continue;
        add(from, box, row);
        from = box;
      }
      add(from, b, row);
    }
    // (while the budget shares them: the edges of a node feeding more than D.fanout boxes
    // drawn as one edge to a mark "→ N", the boxes named in its tooltip)
    const marks = P.shareFanout ? shareWide(drawn, degree, out) : [];
    if (marks.length) drawn = drawn.filter(function (d) { return !(degree.get(d[0]) > D.fanout); });
    for (let j = 0; j < drawn.length; j++) {
      const d = drawn[j], wide = !P.rankWide && degree.get(d[0]) > D.fanout;
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
    P.measured = { nodes: boxes + opened.length + marks.length, edges: drawn.length + marks.length + backSeen.size,
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
  // holding both ends, and through a point ("a -> b::via1", ...) held on the title rank of each
  // titled cluster it enters (rank=same), inside it; only the last part has an arrowhead.  The data
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
      let inner = "";  // each point in its cluster, nested in the one before, on its title's rank
      for (let k = entered.length; k >= 1; k--) {
        const pid = '"' + name + "::via" + k + '"';
        const vid = pid + " [" + point + ' id="v' + j + "_" + k + '"] ';
        const same = "{rank=same; " + titleId(entered[k - 1]) + "; " + pid + "} ";
        inner = inClusters([entered[k - 1]], (vid + same + inner).trim());
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
  P.shareFanout = false;
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
      // in the font of its edge, as make_dot's style_fanout writes it (without one Graphviz
      // would draw the mark in its default Times)
      const edge = attrText(t.attrs), font = /(?:^|\s)fontname=("(?:[^"\\]|\\.)*"|[^\s\]]+)/.exec(edge);
      // a styler's own style_fanout (page data "fanout_marks", renderer/_html_fanout.py): its
      // mark for these very boxes, else its attributes around the page's label and tooltip
      const own = D.fanout_marks && D.fanout_marks[a];
      const exact = own ? own.exact[t.to.slice().sort(function (x, y) { return x - y; }).join(",")] : undefined;
      if (exact !== undefined) {
        out.push("\t" + mark + " [" + S[exact] + ' id="f' + a + '"]');
      } else if (own) {
        out.push("\t" + mark + " [" + S[own.rest] + ' label="' + label + '" tooltip="' + tip + '" id="f' + a + '"]');
      } else {
        out.push("\t" + mark + ' [shape=plain fontsize=10 label="' + label + '" tooltip="' + tip + '" id="f' + a + '"' +
          (font ? " fontname=" + font[1] : "") + "]");
      }
      out.push("\t" + S[N[a][2]] + " -> " + mark + " [" + edge + "]");
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
  Object.assign(P, { buildDot });
})(window.__tr.page);
