"""A diff as one self-contained HTML page: the union drawing laid out once, with views over it.

The page holds the SVG that Graphviz makes of :func:`~torchrecorder.diff.draw.make_diff_dot`'s
union drawing (so it draws what ``make_dot(d)`` draws), the entries' old and new values as
JSON, and a small script: *union* / *a* / *b* / *a | b* (two panes side by side) toggle what
is visible over the same coordinates; *only changes* fades what did not change; a list of
the changes with *previous* / *next*; a side panel with the old and new values of the
selected node; hovering a node highlights its counterpart in the other pane.  It needs no
network and no server.
"""

from __future__ import annotations

import json
import re
from html import escape
from typing import Any

from ..backend import render_source
from .draw import make_diff_dot
from .model import Diff
from .status import MARKS
from .text import describe, title_of

__all__ = ["make_diff_html"]

_CSS = """
body{margin:0;font:13px Helvetica,Arial,sans-serif;color:#222;display:flex;flex-direction:column;height:100vh}
#bar{display:flex;gap:6px;align-items:center;padding:6px 10px;border-bottom:1px solid #ccc;background:#fafafa}
#bar button{font:inherit;padding:2px 8px;border:1px solid #999;background:#fff;border-radius:3px;cursor:pointer}
#bar button.on{background:#0072B2;color:#fff;border-color:#0072B2}
#main{display:flex;flex:1;min-height:0}
#changes{width:260px;overflow:auto;border-right:1px solid #ddd;margin:0;padding:4px 0;list-style:none}
#changes li{padding:2px 8px;cursor:pointer;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
#changes li.sel{background:#dcecf8}
#panes{flex:1;display:flex;min-width:0}
.pane{flex:1;overflow:auto;position:relative;border-right:1px solid #eee}
.pane h3{position:sticky;top:0;left:0;margin:0;padding:2px 8px;background:rgba(255,255,255,.9);font-size:12px}
#panel{width:300px;overflow:auto;border-left:1px solid #ddd;padding:8px}
#panel table{border-collapse:collapse;width:100%}
#panel td,#panel th{border:1px solid #ddd;padding:2px 4px;text-align:left;vertical-align:top}
.view-a .side-b,.view-b .side-a{visibility:hidden}
.only-changes g.diff-same{opacity:.15}
g.hl>path,g.hl>polygon,g.hl>ellipse{stroke:#000 !important;stroke-width:3px !important}
g.sel>path,g.sel>polygon,g.sel>ellipse{stroke:#000 !important;stroke-width:4px !important;stroke-dasharray:4 2}
"""

_JS = r"""
(function(){
const D = JSON.parse(document.getElementById('diff-data').textContent);
const panes = document.getElementById('panes');
const template = document.getElementById('diff-svg').firstElementChild;
template.querySelectorAll('g[id^="d"]').forEach(g => { g.dataset.entry = g.id.slice(1); g.removeAttribute('id'); });
function pane(view, title){
  const p = document.createElement('div'); p.className = 'pane view-' + view;
  const h = document.createElement('h3'); h.textContent = title; p.appendChild(h);
  p.appendChild(template.cloneNode(true)); return p;
}
const state = {view: 'union', sel: -1};
const changes = D.order.filter(i => template.querySelector('g[data-entry="' + i + '"]'));
function draw(){
  panes.textContent = '';
  if (state.view === 'ab') { panes.appendChild(pane('a', D.a + ' (a)')); panes.appendChild(pane('b', D.b + ' (b)')); }
  else panes.appendChild(pane(state.view, state.view === 'union' ? D.a + ' → ' + D.b : (state.view === 'a' ? D.a + ' (a)' : D.b + ' (b)')));
  document.querySelectorAll('#bar button[data-view]').forEach(b => b.classList.toggle('on', b.dataset.view === state.view));
  panes.querySelectorAll('g[data-entry]').forEach(g => {
    g.addEventListener('mouseenter', () => hover(g.dataset.entry, true));
    g.addEventListener('mouseleave', () => hover(g.dataset.entry, false));
    g.addEventListener('click', () => select(changes.indexOf(+g.dataset.entry), +g.dataset.entry));
  });
  const ps = [...panes.querySelectorAll('.pane')];
  ps.forEach(p => p.addEventListener('scroll', () => ps.forEach(q => {  // the panes scroll together
    if (q !== p && (q.scrollTop !== p.scrollTop || q.scrollLeft !== p.scrollLeft)) { q.scrollTop = p.scrollTop; q.scrollLeft = p.scrollLeft; } })));
  if (state.sel >= 0) mark(state.selEntry);
}
function hover(e, on){
  panes.querySelectorAll('g[data-entry="' + e + '"]').forEach(g => g.classList.toggle('hl', on));
  if (on) show(+e);
}
function mark(e){
  panes.querySelectorAll('g.sel').forEach(g => g.classList.remove('sel'));
  panes.querySelectorAll('g[data-entry="' + e + '"]').forEach(g => g.classList.add('sel'));
}
function show(e){
  const x = D.entries[e]; const panel = document.getElementById('panel'); panel.textContent = '';
  if (!x) return;
  const h = document.createElement('h4'); h.textContent = x.title + ' — ' + x.status; panel.appendChild(h);
  const t = document.createElement('table'); panel.appendChild(t);
  const rows = [['', 'a (old)', 'b (new)'], ['key', x.a === null ? '—' : x.a, x.b === null ? '—' : x.b]];
  for (const [k, v] of Object.entries(x.changes || {})) rows.push([k, v[0], v[1]]);
  rows.forEach((r, i) => { const tr = t.insertRow(); r.forEach(c => { const td = document.createElement(i ? 'td' : 'th'); td.textContent = c; tr.appendChild(td); }); });
  if (x.text) { const p = document.createElement('p'); p.textContent = x.text; panel.appendChild(p); }
}
function select(i, e){
  state.sel = i; state.selEntry = (e === undefined ? changes[i] : e);
  document.querySelectorAll('#changes li').forEach((li, j) => li.classList.toggle('sel', j === i));
  mark(state.selEntry); show(state.selEntry);
  const g = [...panes.querySelectorAll('g[data-entry="' + state.selEntry + '"]')]
    .find(x => getComputedStyle(x).visibility !== 'hidden');
  if (g && g.scrollIntoView) g.scrollIntoView({block: 'center', inline: 'center'});
  document.getElementById('pos').textContent = (i >= 0 ? i + 1 : '–') + ' / ' + changes.length;
}
const list = document.getElementById('changes');
changes.forEach((e, i) => { const li = document.createElement('li'); const x = D.entries[e];
  li.textContent = x.mark + ' ' + x.title; li.title = x.text; li.addEventListener('click', () => select(i)); list.appendChild(li); });
document.querySelectorAll('#bar button[data-view]').forEach(b => b.addEventListener('click', () => { state.view = b.dataset.view; draw(); }));
document.getElementById('next').addEventListener('click', () => { if (changes.length) select((state.sel + 1) % changes.length); });
document.getElementById('prev').addEventListener('click', () => { if (changes.length) select((state.sel - 1 + changes.length) % changes.length); });
document.getElementById('only').addEventListener('change', ev => panes.classList.toggle('only-changes', ev.target.checked));
document.addEventListener('keydown', ev => { if (ev.key === 'n') document.getElementById('next').click(); if (ev.key === 'p') document.getElementById('prev').click(); });
document.getElementById('pos').textContent = '– / ' + changes.length;
draw();
window.__diff = {changes: changes, state: state};
})();
"""


def _svg(source: str) -> str:
    svg = render_source(source, "svg").decode("utf-8")
    start = svg.find("<svg")
    if start < 0:
        raise RuntimeError("Graphviz wrote no <svg> element")
    return re.sub(r"<!--.*?-->", "", svg[start:], flags=re.S)


def make_diff_html(d: Diff, **kwargs: Any) -> str:
    """The HTML page of a diff (see the module's docstring); ``kwargs`` as for
    :func:`~torchrecorder.diff.draw.make_diff_dot` (but ``view``: the page has every view).

    Raises:
        GraphvizNotFoundError: no Graphviz to lay the drawing out.
    """
    kwargs.pop("view", None)
    svg = _svg(make_diff_dot(d, "union", **kwargs).source)
    entries: dict[str, Any] = {}
    order = []
    for e in d.entries:
        if e.kind not in ("layer", "op", "tensor", "param"):
            continue
        entries[str(e.index)] = {"a": e.a, "b": e.b, "status": e.status, "title": title_of(d, e),
                                 "mark": MARKS[e.status].strip() or "=", "text": describe(d, e),
                                 "changes": {k: list(v) for k, v in e.changes.items()}}
        if e.status != "same":
            order.append(e.index)
    data = json.dumps({"a": d.a.name, "b": d.b.name, "entries": entries, "order": order},
                      ensure_ascii=False, sort_keys=True)
    data = data.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    csp = ("default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
           "img-src data:")
    title = escape(f"diff {d.a.name} → {d.b.name}")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<meta http-equiv=\"Content-Security-Policy\" content=\"{csp}\">"
        f"<title>{title}</title><style>{_CSS}</style></head><body>"
        "<div id=\"bar\"><button data-view=\"union\">union</button><button data-view=\"a\">a</button>"
        "<button data-view=\"b\">b</button><button data-view=\"ab\">a | b</button>"
        "<label><input type=\"checkbox\" id=\"only\"> only changes</label>"
        "<button id=\"prev\">◀ previous</button><span id=\"pos\"></span><button id=\"next\">next ▶</button>"
        f"<span>{escape(d.summary().splitlines()[0])}</span></div>"
        "<div id=\"main\"><ul id=\"changes\"></ul><div id=\"panes\"></div><div id=\"panel\"></div></div>"
        f"<div id=\"diff-svg\" hidden>{svg}</div>"
        f"<script type=\"application/json\" id=\"diff-data\">{data}</script>"
        f"<script>{_JS}</script></body></html>\n")
