// A small line chart drawn as inline SVG: time on x, one polyline per series,
// a legend, y grid with nice ticks and a hover/focus readout. No library.
import { h, s } from './dom.js';

const W = 640;
const H = 220;
const PAD = { l: 48, r: 12, t: 10, b: 24 };

// niceScale picks a y axis for values up to v: a step of 1, 2 or 5 times a
// power of ten giving at most 4 intervals, and the top as a whole number of steps.
export function niceScale(v) {
  if (!(v > 0)) return { max: 1, step: 0.25 };
  const raw = v / 4;
  const p = Math.pow(10, Math.floor(Math.log10(raw)));
  let step = 10 * p;
  for (const m of [1, 2, 5]) if (m * p >= raw) { step = m * p; break; }
  const max = Math.ceil(v / step - 1e-9) * step;
  return { max, step };
}

function fmtTick(v) {
  if (v >= 1e6) return (v / 1e6).toFixed(v % 1e6 ? 1 : 0) + 'M';
  if (v >= 1e3) return (v / 1e3).toFixed(v % 1e3 ? 1 : 0) + 'k';
  return String(Math.round(v * 100) / 100);
}

function clock(ms) {
  const d = new Date(ms);
  return String(d.getHours()).padStart(2, '0') + ':' + String(d.getMinutes()).padStart(2, '0');
}

// lineChart({title, startMs, intervalMs, series: [{name, values}], unit})
// values may hold null (or negative, meaning "not sampled") as gaps.
export function lineChart({ title, startMs, intervalMs, series, unit = '' }) {
  const n = Math.max(0, ...series.map(x => x.values.length));
  const { max, step } = niceScale(Math.max(0, ...series.flatMap(x => x.values.filter(v => v !== null && v >= 0))));
  const iw = W - PAD.l - PAD.r;
  const ih = H - PAD.t - PAD.b;
  const xAt = i => PAD.l + (n <= 1 ? 0 : (i / (n - 1)) * iw);
  const yAt = v => PAD.t + ih - (v / max) * ih;

  const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart', role: 'img', 'aria-label': title });
  svg.append(s('title', null, title));
  for (let k = 0; k * step <= max + step / 1e6; k++) {
    const v = k * step;
    svg.append(s('line', { x1: PAD.l, x2: W - PAD.r, y1: yAt(v), y2: yAt(v), class: 'grid' }));
    svg.append(s('text', { x: PAD.l - 6, y: yAt(v) + 4, class: 'tick', 'text-anchor': 'end' }, fmtTick(v)));
  }
  if (n > 1) {
    for (let k = 0; k <= 4; k++) {
      const i = Math.round(((n - 1) * k) / 4);
      const anchor = k === 0 ? 'start' : k === 4 ? 'end' : 'middle';
      svg.append(s('text', { x: xAt(i), y: H - 6, class: 'tick', 'text-anchor': anchor }, clock(startMs + i * intervalMs)));
    }
  }
  series.forEach((ser, si) => {
    let d = '';
    let pen = false;
    ser.values.forEach((v, i) => {
      if (v === null || v < 0) { pen = false; return; }
      d += (pen ? 'L' : 'M') + xAt(i).toFixed(1) + ' ' + yAt(v).toFixed(1);
      pen = true;
    });
    if (d) svg.append(s('path', { d, class: 'line c' + (si % 8) }));
  });

  const cursor = s('line', { y1: PAD.t, y2: PAD.t + ih, class: 'cursor', visibility: 'hidden' });
  svg.append(cursor);
  const readout = h('div', { class: 'readout muted', 'aria-live': 'polite' }, '\u00a0');
  const show = (i) => {
    if (n === 0) return;
    i = Math.max(0, Math.min(n - 1, i));
    cursor.setAttribute('x1', xAt(i));
    cursor.setAttribute('x2', xAt(i));
    cursor.setAttribute('visibility', 'visible');
    readout.textContent = clock(startMs + i * intervalMs) + '  ' +
      series.map(x => `${x.name}: ${x.values[i] === null || x.values[i] < 0 || x.values[i] === undefined ? '—' : fmtTick(x.values[i]) + unit}`).join('  ');
    svg.dataset.index = i;
  };
  svg.addEventListener('mousemove', (e) => {
    const r = svg.getBoundingClientRect();
    const x = ((e.clientX - r.left) / r.width) * W;
    show(Math.round(((x - PAD.l) / iw) * (n - 1)));
  });
  // Keyboard: focus the chart and move the cursor with the arrow keys.
  svg.setAttribute('tabindex', '0');
  svg.addEventListener('keydown', (e) => {
    const cur = svg.dataset.index === undefined ? n - 1 : Number(svg.dataset.index);
    if (e.key === 'ArrowLeft') { show(cur - 1); e.preventDefault(); }
    if (e.key === 'ArrowRight') { show(cur + 1); e.preventDefault(); }
  });
  svg.addEventListener('focus', () => show(n - 1));

  const legend = h('ul', { class: 'legend' }, series.map((x, si) => h('li', null, h('span', { class: 'swatch c' + (si % 8), 'aria-hidden': 'true' }), x.name)));
  return h('figure', { class: 'chart-box' }, h('figcaption', null, title), svg, series.length > 0 ? legend : null, readout,
    n === 0 ? h('p', { class: 'muted' }, 'No data yet.') : null);
}

// perSecond converts per-bucket counts to rates.
export function perSecond(values, intervalMs) {
  return values.map(v => (v === null || v < 0 ? null : (v * 1000) / intervalMs));
}
