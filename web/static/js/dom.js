// Small DOM helpers. Everything the UI shows is built with h(): text goes in as
// text nodes, never as HTML, so a record's bytes cannot inject markup.

const SVG_NS = 'http://www.w3.org/2000/svg';

function applyProps(el, props) {
  for (const [k, v] of Object.entries(props || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') {
      el.addEventListener(k.slice(2).toLowerCase(), v);
    } else if (k === 'dataset') {
      Object.assign(el.dataset, v);
    } else if (k === 'value' || k === 'checked' || k === 'selected') {
      el[k] = v;
    } else {
      el.setAttribute(k === 'className' ? 'class' : k, v === true ? '' : String(v));
    }
  }
}

function appendAll(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// h('button', {class: 'x', onClick: f}, 'text', child, [more]) builds an element.
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  applyProps(el, props);
  appendAll(el, children);
  return el;
}

// s() is h() for SVG elements.
export function s(tag, props, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  applyProps(el, props);
  appendAll(el, children);
  return el;
}

// replace empties el and fills it with children.
export function replace(el, ...children) {
  el.replaceChildren();
  appendAll(el, children);
  return el;
}

export function fmtBytes(n) {
  if (n === undefined || n === null || Number.isNaN(n)) return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  let v = Number(n);
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return (i === 0 ? String(v) : v.toFixed(v < 10 ? 1 : 0)) + ' ' + units[i];
}

export function fmtNum(n) {
  if (n === undefined || n === null || n === '') return '—';
  const v = Number(n);
  return Number.isFinite(v) ? v.toLocaleString('en-US') : String(n);
}

export function fmtRate(n) {
  if (n === undefined || n === null) return '—';
  const v = Number(n);
  if (v >= 1000) return (v / 1000).toFixed(1) + 'k/s';
  return (v >= 10 || v === 0 ? v.toFixed(0) : v.toFixed(1)) + '/s';
}

export function fmtTime(ms) {
  if (ms === undefined || ms === null || ms === '') return '—';
  const d = new Date(typeof ms === 'number' ? ms : Date.parse(ms));
  if (Number.isNaN(d.getTime())) return String(ms);
  return d.toISOString().replace('T', ' ').replace('Z', ' UTC');
}

export function fmtDuration(ms) {
  if (ms === undefined || ms === null) return '—';
  const v = Number(ms);
  if (v < 1000) return v + ' ms';
  if (v < 60000) return (v / 1000).toFixed(1) + ' s';
  if (v < 3600000) return (v / 60000).toFixed(1) + ' min';
  return (v / 3600000).toFixed(1) + ' h';
}

// table builds an accessible table from column specs {label, get(row), cls?}.
export function table(columns, rows, opts = {}) {
  const head = h('thead', null, h('tr', null, columns.map(c => h('th', { scope: 'col', class: c.num ? 'num' : null }, c.label))));
  const body = h('tbody', null, rows.map(r => h('tr', { class: opts.rowClass ? opts.rowClass(r) : null },
    columns.map(c => h('td', { class: c.num ? 'num' : null, 'data-label': c.label }, c.get(r))))));
  if (rows.length === 0) {
    body.append(h('tr', null, h('td', { colspan: columns.length, class: 'empty' }, opts.empty || 'Nothing here yet.')));
  }
  return h('div', { class: 'table-wrap' + (opts.stack === false ? '' : ' stack') }, h('table', { class: opts.cls || null }, opts.caption ? h('caption', null, opts.caption) : null, head, body));
}

// toast shows a short status message in the page's live region.
export function toast(msg, kind = 'info') {
  const box = document.getElementById('toasts');
  if (!box) return;
  const el = h('div', { class: 'toast ' + kind, role: kind === 'error' ? 'alert' : 'status' }, msg);
  box.append(el);
  while (box.children.length > 2) box.firstElementChild.remove();
  setTimeout(() => el.remove(), kind === 'error' ? 8000 : 3500);
}

export function errorBox(err) {
  const p = err && err.problem;
  return h('div', { class: 'error', role: 'alert' },
    h('strong', null, p && p.title ? p.title : 'Request failed'), ' ',
    p && p.detail ? p.detail : String(err && err.message ? err.message : err));
}

// field wraps a labelled form control.
export function field(label, control, hint) {
  const id = control.id || ('f-' + Math.random().toString(36).slice(2, 9));
  control.id = id;
  return h('div', { class: 'field' }, h('label', { for: id }, label), control, hint ? h('small', null, hint) : null);
}
