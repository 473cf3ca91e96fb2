"""Geometry checks of a drawn figure in Chromium: text inside its shape, lines of text apart,
edges clear of text, as a reader's browser lays the text out with its own fonts.

:data:`FIGURE_PROBLEMS` is a JavaScript function run on a page holding one Graphviz SVG (a
file drawn by ``dot`` or the HTML view's canvas); it returns a list of problems, each a short
sentence naming the text involved, so that ``assert problems == []`` shows what collided.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = ["FIGURE_PROBLEMS", "FONT_SETS", "font_env", "figure_problems"]

#: the font sets the figures are checked with: the machine's fonts (DejaVu, and Liberation where
#: installed, as in CI) and DejaVu alone (a fresh Debian machine or container)
FONT_SETS = ("system", "dejavu")

_DEJAVU_DIRS = ("/usr/share/fonts/truetype/dejavu", "/usr/share/fonts/dejavu",
                "/usr/share/fonts/TTF")
_LIBERATION_DIRS = ("/usr/share/fonts/truetype/liberation2", "/usr/share/fonts/truetype/liberation",
                    "/usr/share/fonts/liberation")


def font_env(font_set: str, scratch: Path) -> dict[str, str]:
    """Environment variables under which fontconfig (Graphviz, Chromium) sees ``font_set``:
    nothing to change for ``"system"``; a configuration listing only DejaVu's folder for
    ``"dejavu"`` (written into ``scratch``); the same for Liberation alone, ``"liberation"``
    (a machine without DejaVu)."""
    if font_set == "system":
        return {}
    if font_set not in ("dejavu", "liberation"):
        raise ValueError(f"unknown font set {font_set!r}")
    dirs = [d for d in (_DEJAVU_DIRS if font_set == "dejavu" else _LIBERATION_DIRS) if os.path.isdir(d)]
    if not dirs:
        raise FileNotFoundError(f"{font_set} fonts are not installed (apt-get install fonts-{font_set}"
                                f"{'-core' if font_set == 'dejavu' else '2'})")
    scratch.mkdir(parents=True, exist_ok=True)
    conf = scratch / "fonts.conf"
    conf.write_text('<?xml version="1.0"?>\n<!DOCTYPE fontconfig SYSTEM "fonts.dtd">\n<fontconfig>\n'
                    + "".join(f"  <dir>{d}</dir>\n" for d in dirs)
                    + '  <include ignore_missing="yes">/etc/fonts/conf.d</include>\n'
                    + f"  <cachedir>{scratch / 'cache'}</cachedir>\n</fontconfig>\n", encoding="utf-8")
    return {"FONTCONFIG_FILE": str(conf)}


#: JavaScript: ``(selector) => [problem, ...]`` for the SVG matched by ``selector``.  Text boxes
#: are the browser's (``getBBox``: the advance width and the font's full ascent-to-descent
#: height), so two stacked lines whose boxes meet would let one line's underscores or
#: descenders touch the next.
FIGURE_PROBLEMS = r"""(selector) => {
  const svg = document.querySelector(selector);
  if (!svg) return ['no SVG matched ' + selector];
  const problems = [];
  const owner = el => el.closest('g.node, g.cluster, g.edge');
  const texts = Array.from(svg.querySelectorAll('text')).filter(t => t.textContent.trim());
  texts.splice(0, texts.length, ...texts.map(t => {
    const b = t.getBBox();
    return {el: t, g: owner(t), x0: b.x, x1: b.x + b.width, y0: b.y, y1: b.y + b.height,
            text: t.textContent, size: parseFloat(t.getAttribute('font-size') || '14')};
  }));
  const shapeOf = g => g && g.querySelector('polygon, path, ellipse');
  const bbox = el => {
    const b = el.getBBox();
    return {x0: b.x, x1: b.x + b.width, y0: b.y, y1: b.y + b.height};
  };
  // 1. text inside its node's or cluster's shape
  for (const t of texts) {
    if (!t.g || t.g.classList.contains('edge')) continue;
    const shape = shapeOf(t.g);
    if (!shape) continue;
    const s = bbox(shape);
    let inside = t.x0 >= s.x0 + 0.5 && t.x1 <= s.x1 - 0.5 && t.y0 >= s.y0 - 0.01 && t.y1 <= s.y1 + 0.01;
    if (inside && shape.tagName === 'ellipse') {
      const cx = (s.x0 + s.x1) / 2, cy = (s.y0 + s.y1) / 2, rx = (s.x1 - s.x0) / 2, ry = (s.y1 - s.y0) / 2;
      const h = Math.max(0, Math.min(t.y1 - t.y0, ry) * 0.6);  // the ink, not the line's full box
      const my = (t.y0 + t.y1) / 2;
      for (const [x, y] of [[t.x0, my - h / 2], [t.x1, my - h / 2], [t.x0, my + h / 2], [t.x1, my + h / 2]]) {
        if (((x - cx) / rx) ** 2 + ((y - cy) / ry) ** 2 > 1.0001) inside = false;
      }
    }
    if (!inside) problems.push(`text "${t.text}" leaves its shape`);
  }
  // 2. no two text runs meet: neither stacked lines nor runs on one line
  for (let i = 0; i < texts.length; i++) {
    for (let j = i + 1; j < texts.length; j++) {
      const a = texts[i], b = texts[j];
      const gap = Math.max(b.x0 - a.x1, a.x0 - b.x1);
      const vgap = Math.max(b.y0 - a.y1, a.y0 - b.y1);
      const overlap = Math.min(a.y1, b.y1) - Math.max(a.y0, b.y0);
      const sameLine = overlap > 0.5 * Math.min(a.y1 - a.y0, b.y1 - b.y0);
      if (vgap < -0.05 && gap < 0) {
        problems.push(`text "${a.text}" touches "${b.text}" (${gap.toFixed(1)}, ${vgap.toFixed(1)})`);
      } else if (sameLine && gap >= 0 && gap < Math.min(a.size, b.size) / 8) {
        problems.push(`text "${a.text}" runs into "${b.text}" (gap ${gap.toFixed(1)})`);
      }
    }
  }
  // 3. edges (lines and arrowheads) clear of every text run, titles and edge labels included
  const shrink = 0.3;
  for (const e of svg.querySelectorAll('g.edge')) {
    const pts = [];
    for (const p of e.querySelectorAll('path')) {
      const n = p.getTotalLength();
      for (let k = 0; k <= n; k += 0.75) { const q = p.getPointAtLength(k); pts.push([q.x, q.y]); }
    }
    for (const poly of e.querySelectorAll('polygon')) {
      const v = poly.getAttribute('points').trim().split(/\s+/).map(s => s.split(',').map(Number));
      for (let k = 0; k + 1 < v.length; k++) for (let f = 0; f <= 1; f += 0.1)
        pts.push([v[k][0] + f * (v[k + 1][0] - v[k][0]), v[k][1] + f * (v[k + 1][1] - v[k][1])]);
    }
    const name = (e.querySelector('title') || {}).textContent;
    for (const t of texts) {
      const inside = ([x, y]) => x > t.x0 + shrink && x < t.x1 - shrink
                                 && y > t.y0 + shrink && y < t.y1 - shrink;
      if (pts.some(inside)) {
        problems.push(`edge ${name} crosses text "${t.text}"`);
      }
    }
  }
  // 4. edge labels clear of every node's shape
  const shapes = Array.from(svg.querySelectorAll('g.node')).map(g => [g, shapeOf(g)]).filter(x => x[1]);
  for (const t of texts) {
    if (!t.g || !t.g.classList.contains('edge')) continue;
    for (const [g, shape] of shapes) {
      const s = bbox(shape);
      if (t.x0 < s.x1 && t.x1 > s.x0 && t.y0 < s.y1 && t.y1 > s.y0)
        problems.push(`edge label "${t.text}" overlaps node ${(g.querySelector('title') || {}).textContent}`);
    }
  }
  return problems;
}"""


def figure_problems(page: Any, selector: str = "svg") -> list[str]:
    """The problems :data:`FIGURE_PROBLEMS` finds in the SVG ``selector`` on ``page``."""
    return list(page.evaluate(FIGURE_PROBLEMS, selector))
