// #/charts: produce and consume rates per topic and lag per group over the last
// hour, from the server's in-process ring buffer (GET /v1/stats/series).
import { h, replace, errorBox } from '../dom.js';
import { get, optional } from '../api.js';
import { curlButton } from '../curl.js';
import { lineChart, perSecond } from '../chart.js';

const TOP = 8;

function sum(values) { return values.reduce((a, b) => a + Math.max(0, b || 0), 0); }

// topSeries keeps the busiest n series by total of field.
export function topSeries(list, field, nameOf, n = TOP) {
  return list.map(x => ({ name: nameOf(x), values: x[field] || [], total: sum(x[field] || []) }))
    .filter(x => x.total > 0).sort((a, b) => b.total - a.total).slice(0, n);
}

export async function render(root, params, ctx) {
  const body = h('div');
  replace(root, h('div', { class: 'row' }, h('h1', null, 'Charts'), h('span', { class: 'spacer' }), curlButton(() => ({ path: '/v1/stats/series' }))),
    h('p', { class: 'muted' }, 'Last hour, from the server\u2019s in-memory ring buffer. No external metrics stack needed.'), body);
  ctx.every(10000, async () => {
    let s;
    try {
      s = await optional(get('/v1/stats/series', null, { signal: ctx.signal }));
    } catch (e) {
      if (e.name !== 'AbortError') replace(body, errorBox(e));
      return;
    }
    if (!s) { replace(body, h('p', { class: 'notice' }, 'This server does not expose /v1/stats/series.')); return; }
    const rate = (list) => list.map(x => ({ name: x.name, values: perSecond(x.values, s.interval_ms) }));
    const topics = s.topics || [];
    const groups = (s.groups || []).map(g => ({ name: g.group, values: g.lag, total: Math.max(0, ...g.lag) })).sort((a, b) => b.total - a.total).slice(0, TOP);
    const opts = { startMs: s.start_ms, intervalMs: s.interval_ms };
    replace(body, h('div', { class: 'charts' },
      lineChart({ ...opts, title: 'Produced records/s by topic', unit: '/s', series: rate(topSeries(topics, 'produced_records', x => x.topic)) }),
      lineChart({ ...opts, title: 'Consumed records/s by topic', unit: '/s', series: rate(topSeries(topics, 'consumed_records', x => x.topic)) }),
      lineChart({ ...opts, title: 'Produced bytes/s by topic', unit: 'B/s', series: rate(topSeries(topics, 'produced_bytes', x => x.topic)) }),
      lineChart({ ...opts, title: 'Consumer group lag (records)', series: groups })));
  });
}
