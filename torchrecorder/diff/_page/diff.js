// The diff page's script (torchrecorder.diff.html): the views' drawings, changes, panel.
(function(){
const D = JSON.parse(document.getElementById('diff-data').textContent);
const panes = document.getElementById('panes');
// one drawing per view (union, a, b), each the union's layout with its own side's labels
const drawings = {};
document.querySelectorAll('.diff-svg').forEach(div => {
  const svg = div.firstElementChild; drawings[div.dataset.view] = svg;
  svg.querySelectorAll('g[id^="d"]').forEach(g => { g.dataset.entry = g.id.slice(1); g.removeAttribute('id'); });
});
const template = drawings.union;
function pane(view, title){
  const p = document.createElement('div'); p.className = 'pane view-' + view;
  const h = document.createElement('h3'); h.textContent = title; p.appendChild(h);
  const c = document.createElement('div'); c.className = 'canvas'; c.appendChild(drawings[view].cloneNode(true));
  p.appendChild(c); return p;
}
// pan and zoom, shared by the panes (so a | b stay aligned); fitted until the reader zooms or pans
const Z = {tx: 0, ty: 0, scale: 1, auto: true};
function apply(){ panes.querySelectorAll('.canvas').forEach(c => { c.style.transform = 'translate(' + Z.tx + 'px,' + Z.ty + 'px) scale(' + Z.scale + ')'; }); }
function svgSize(){  // the drawing's size at scale 1 (every canvas is set to it first)
  Z.scale = 1; Z.tx = 0; Z.ty = 0; apply();
  const svg = panes.querySelector('.canvas svg'); if (!svg) return [1, 1];
  const r = svg.getBoundingClientRect(); return [r.width, r.height];
}
function fit(){
  const p = panes.querySelector('.pane'); if (!p) return;
  const size = svgSize(), w = p.clientWidth, h = p.clientHeight;
  Z.scale = Math.min(2, (w - 20) / size[0], (h - 34) / size[1]); if (!(Z.scale > 0)) Z.scale = 1;
  Z.tx = Math.max(10, (w - size[0] * Z.scale) / 2); Z.ty = Math.max(24, (h - size[1] * Z.scale) / 2); apply();
}
function zoomAt(factor, cx, cy){
  Z.auto = false; const s = Math.min(8, Math.max(0.02, Z.scale * factor));
  Z.tx = cx - (cx - Z.tx) * (s / Z.scale); Z.ty = cy - (cy - Z.ty) * (s / Z.scale); Z.scale = s; apply();
}
function zoomCentre(factor){ const p = panes.querySelector('.pane'); if (p) zoomAt(factor, p.clientWidth / 2, p.clientHeight / 2); }
let drag = null;
function panEvents(p){
  p.addEventListener('wheel', ev => { ev.preventDefault(); const r = p.getBoundingClientRect();
    zoomAt(Math.exp(-ev.deltaY * 0.0015), ev.clientX - r.left, ev.clientY - r.top); }, {passive: false});
  p.addEventListener('pointerdown', ev => { if (ev.button === 0) drag = {x: ev.clientX, y: ev.clientY, tx: Z.tx, ty: Z.ty, moved: false, pane: p}; });
}
window.addEventListener('pointermove', ev => {
  if (!drag) return; const dx = ev.clientX - drag.x, dy = ev.clientY - drag.y;
  if (!drag.moved && Math.abs(dx) + Math.abs(dy) > 4) { drag.moved = true; drag.pane.classList.add('dragging'); }
  if (drag.moved) { Z.auto = false; Z.tx = drag.tx + dx; Z.ty = drag.ty + dy; apply(); }
});
window.addEventListener('pointerup', () => { if (drag) drag.pane.classList.remove('dragging'); drag = null; });
if (window.ResizeObserver) new ResizeObserver(() => { if (Z.auto) fit(); }).observe(panes);
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
  panes.querySelectorAll('.pane').forEach(panEvents);
  if (Z.auto) fit(); else apply();
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
  if (g) {  // brought to the middle of its pane when it is outside
    const p = g.closest('.pane').getBoundingClientRect(), r = g.getBoundingClientRect();
    const cx = r.left + r.width / 2 - p.left, cy = r.top + r.height / 2 - p.top;
    if (cx < 0 || cx > p.width || cy < 0 || cy > p.height) { Z.auto = false; Z.tx += p.width / 2 - cx; Z.ty += p.height / 2 - cy; apply(); }
  }
  document.getElementById('pos').textContent = (i >= 0 ? i + 1 : '–') + ' / ' + changes.length;
}
const list = document.getElementById('changes');
changes.forEach((e, i) => { const li = document.createElement('li'); const x = D.entries[e];
  // a long path is cut at its start: the end (which layer, which part) is what tells entries apart
  const m = document.createElement('span'); m.textContent = x.mark; li.appendChild(m);
  const t = document.createElement('span'); t.className = 'path'; t.textContent = '\u200e' + x.title + '\u200e'; li.appendChild(t);
  li.title = x.title + (x.text ? ': ' + x.text : ''); li.addEventListener('click', () => select(i)); list.appendChild(li); });
document.querySelectorAll('#bar button[data-view]').forEach(b => b.addEventListener('click', () => { state.view = b.dataset.view; draw(); }));
document.getElementById('next').addEventListener('click', () => { if (changes.length) select((state.sel + 1) % changes.length); });
document.getElementById('prev').addEventListener('click', () => { if (changes.length) select((state.sel - 1 + changes.length) % changes.length); });
document.getElementById('only').addEventListener('change', ev => panes.classList.toggle('only-changes', ev.target.checked));
document.getElementById('fit').addEventListener('click', () => { Z.auto = true; fit(); });
document.getElementById('zin').addEventListener('click', () => zoomCentre(1.25));
document.getElementById('zout').addEventListener('click', () => zoomCentre(0.8));
document.addEventListener('keydown', ev => { if (ev.key === 'n') document.getElementById('next').click(); if (ev.key === 'p') document.getElementById('prev').click();
  if (ev.key === '+' || ev.key === '=') zoomCentre(1.25); if (ev.key === '-') zoomCentre(0.8); if (ev.key === '0') { Z.auto = true; fit(); } });
document.getElementById('pos').textContent = '– / ' + changes.length;
draw();
window.__diff = {changes: changes, state: state, zoom: Z};
})();
