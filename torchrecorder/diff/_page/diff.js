// The diff page's script (torchrecorder.diff.html): views over one SVG, changes, panel.
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
