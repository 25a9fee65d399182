// #/groups/{group}: members and assignment, committed offsets with lag (and
// lag in time when the server reports it) per partition, a lag chart, and a
// reset of the offsets with a dry-run preview before anything is committed.
// Calls GET /v1/groups/{g}, GET /v1/topics/{t}, GET /v1/stats/series,
// GET .../records?timestamp (to resolve a reset by time), POST /v1/groups/{g}/offsets.
import { h, replace, table, fmtNum, fmtDuration, field, errorBox, toast } from '../dom.js';
import { get, post, optional, seg } from '../api.js';
import { curlButton } from '../curl.js';
import { confirmDialog } from '../forms.js';
import { groupName, offsetsOf, assignmentOf, totalLag, planReset } from '../groups.js';
import { lineChart } from '../chart.js';

function membersTable(d) {
  const members = Array.isArray(d.members) ? d.members : [];
  return table([
    { label: 'Member', get: m => h('code', null, m.member_id ?? m.id ?? '—') },
    { label: 'Client', get: m => m.client_id ?? '—' },
    { label: 'Host', get: m => m.client_host ?? m.host ?? '—' },
    { label: 'Assignment', get: m => assignmentOf(m) || '—' },
  ], members, { caption: `${members.length} members`, empty: 'No active members.' });
}

function offsetsTable(rows) {
  return table([
    { label: 'Topic', get: o => h('a', { href: '#/topics/' + seg(o.topic) }, o.topic) },
    { label: 'Partition', num: true, get: o => String(o.partition) },
    { label: 'Committed', num: true, get: o => (o.committed < 0 ? 'none' : fmtNum(o.committed)) },
    { label: 'End offset', num: true, get: o => fmtNum(o.end) },
    { label: 'Lag', num: true, get: o => fmtNum(o.lag) },
    { label: 'Lag (time)', num: true, get: o => (o.lagMs === undefined ? '—' : fmtDuration(o.lagMs)) },
  ], rows, { caption: 'Committed offsets', empty: 'No committed offsets.', rowClass: o => (o.lag > 0 ? 'warn' : null) });
}

async function resolveByTime(rows, ts, signal) {
  const out = new Map();
  for (const o of rows) {
    const res = await get('/v1/topics/' + seg(o.topic) + '/partitions/' + o.partition + '/records', { timestamp: ts, max_records: 1 }, { signal });
    const first = (res.records || [])[0];
    out.set(o.topic + '/' + o.partition, first ? first.offset : res.next_offset);
  }
  return out;
}

function resetPanel(name, rows, signal, reload) {
  const path = '/v1/groups/' + seg(name) + '/offsets';
  const topics = [...new Set(rows.map(o => o.topic))];
  const topicSel = h('select', { name: 'topic' }, h('option', { value: '' }, 'All topics'), topics.map(t => h('option', { value: t }, t)));
  const strat = h('select', { name: 'strategy' }, [['earliest', 'To earliest'], ['latest', 'To latest'], ['offset', 'To offset'], ['shift', 'Shift by'], ['timestamp', 'To time']].map(([v, l]) => h('option', { value: v }, l)));
  const val = h('input', { type: 'number', name: 'value', value: '0' });
  const ts = h('input', { type: 'datetime-local', name: 'time', step: 1 });
  const valField = field('Offset / shift', val);
  const tsField = field('Time (local)', ts);
  const preview = h('div', { 'aria-live': 'polite' });
  let plan = null;
  const sync = () => { valField.hidden = !['offset', 'shift'].includes(strat.value); tsField.hidden = strat.value !== 'timestamp'; };
  strat.addEventListener('change', sync);
  sync();
  const body = () => ({ offsets: (plan || []).map(o => ({ topic: o.topic, partition: o.partition, offset: o.target })) });
  const apply = async () => {
    const ok = await confirmDialog({ title: 'Reset offsets?', message: `Commit ${plan.length} new offsets for group ${name}. Consumers of the group should be stopped first.`, confirmLabel: 'Reset offsets', danger: true });
    if (!ok) return;
    try {
      await post(path, body());
      toast('Offsets reset.');
      reload();
    } catch (e) { replace(preview, errorBox(e)); }
  };
  const dryRun = async (e) => {
    e.preventDefault();
    try {
      const sel = rows.filter(o => !topicSel.value || o.topic === topicSel.value);
      const info = new Map();
      for (const t of new Set(sel.map(o => o.topic))) info.set(t, await get('/v1/topics/' + seg(t), null, { signal }));
      const byTime = strat.value === 'timestamp' ? await resolveByTime(sel, ts.value ? new Date(ts.value).getTime() : 0, signal) : new Map();
      plan = planReset(sel, strat.value, val.value, info, byTime);
      replace(preview, h('h3', null, 'Dry run: nothing committed yet'), table([
        { label: 'Topic', get: o => o.topic },
        { label: 'Partition', num: true, get: o => String(o.partition) },
        { label: 'Current', num: true, get: o => (o.committed < 0 ? 'none' : fmtNum(o.committed)) },
        { label: 'New', num: true, get: o => [fmtNum(o.target), o.clamped ? h('span', { class: 'badge warn' }, ' clamped') : null] },
        { label: 'Lag after', num: true, get: o => fmtNum(o.newLag) },
      ], plan, { rowClass: o => (o.target !== o.committed ? 'warn' : null) }),
      h('div', { class: 'row' }, h('button', { type: 'button', class: 'danger', onClick: apply, 'data-test': 'apply-reset' }, 'Apply reset'),
        curlButton(() => ({ method: 'POST', path, body: body() }))));
    } catch (err) { if (err.name !== 'AbortError') replace(preview, errorBox(err)); }
  };
  return h('form', { class: 'panel', 'aria-label': 'Reset offsets', onSubmit: dryRun },
    h('h2', null, 'Reset offsets'),
    h('div', { class: 'grid-form' }, field('Topic', topicSel), field('Strategy', strat), valField, tsField,
      h('div', null, h('button', { type: 'submit', class: 'ghost', 'data-test': 'dry-run' }, 'Preview (dry run)'))),
    preview);
}

export async function render(root, params, ctx) {
  const name = params.group;
  const path = '/v1/groups/' + seg(name);
  const head = [h('p', { class: 'crumbs' }, h('a', { href: '#/groups' }, 'Groups'), ' /'),
    h('div', { class: 'row' }, h('h1', null, name), h('span', { class: 'spacer' }), curlButton(() => ({ path })))];
  const d = await optional(get(path, null, { signal: ctx.signal })).catch(e => { replace(root, ...head, errorBox(e)); return undefined; });
  if (d === undefined) return;
  if (d === null) {
    replace(root, ...head, h('p', { class: 'notice', 'data-test': 'no-groups' }, `No group named ${name} (or this server does not report groups yet).`));
    return;
  }
  const live = h('div');
  const resetSlot = h('div');
  const chartSlot = h('div');
  const draw = (desc) => {
    const rows = offsetsOf(desc);
    replace(live,
      h('div', { class: 'cards' },
        h('div', { class: 'card' }, h('div', { class: 'k' }, 'State'), h('div', { class: 'v' }, desc.state || '—')),
        h('div', { class: 'card' }, h('div', { class: 'k' }, 'Members'), h('div', { class: 'v' }, fmtNum(Array.isArray(desc.members) ? desc.members.length : 0))),
        h('div', { class: 'card' + (totalLag(desc) > 0 ? ' warn' : '') }, h('div', { class: 'k' }, 'Total lag'), h('div', { class: 'v', 'data-test': 'group-lag' }, fmtNum(totalLag(desc))))),
      h('h2', null, 'Members'), membersTable(desc),
      h('h2', null, 'Offsets and lag'), offsetsTable(rows));
    return rows;
  };
  const rows = draw(d);
  replace(resetSlot, resetPanel(groupName(d) || name, rows, ctx.signal, () => location.reload()));
  replace(root, ...head, live, chartSlot, resetSlot);
  ctx.every(5000, async () => {
    const desc = await optional(get(path, null, { signal: ctx.signal }));
    if (desc) draw(desc);
    const s = await optional(get('/v1/stats/series', null, { signal: ctx.signal })).catch(() => null);
    const gs = s && (s.groups || []).find(x => x.group === name);
    if (gs) replace(chartSlot, h('h2', null, 'Lag, last hour'), lineChart({ title: 'Total lag (records)', startMs: s.start_ms, intervalMs: s.interval_ms, series: [{ name: 'lag', values: gs.lag }] }));
  });
}
