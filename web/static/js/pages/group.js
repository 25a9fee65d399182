// #/groups/{group}: members and assignment, committed offsets with lag (and
// lag in time when the server reports it) per partition, a lag chart, and a
// reset of the offsets with a dry-run preview before anything is committed.
// Calls GET /v1/groups/{g}, GET /v1/topics/{t}, GET /v1/stats/series,
// POST /v1/groups/{g}/offsets/reset (dry run, then apply), POST /v1/groups/{g}/offsets
// (shift by N), DELETE /v1/groups/{g}.
import { h, replace, table, fmtNum, fmtDuration, field, errorBox, toast } from '../dom.js';
import { get, post, del, optional, seg } from '../api.js';
import { curlButton } from '../curl.js';
import { confirmDialog } from '../forms.js';
import { groupName, offsetsOf, assignmentOf, totalLag, planReset, plannedRows } from '../groups.js';
import { lineChart } from '../chart.js';

function membersTable(d) {
  const members = Array.isArray(d.members) ? d.members : [];
  return table([
    { label: 'Member', get: m => [h('code', null, m.member_id ?? m.id ?? '—'), m.member_id && m.member_id === d.leader ? h('span', { class: 'badge accent' }, ' leader') : null] },
    { label: 'Kind', get: m => (m.kind ? h('span', { class: 'badge' }, m.kind) : '—') },
    { label: 'Client', get: m => [m.client_id || '—', m.instance_id ? h('small', { class: 'muted' }, ' static: ' + m.instance_id) : null] },
    { label: 'Host', get: m => m.client_host ?? m.host ?? '—' },
    { label: 'Assignment', get: m => assignmentOf(m) || '—' },
  ], members, { caption: members.length === 1 ? '1 member' : `${members.length} members`, empty: 'No active members.' });
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

// resetPanel plans a reset with POST /v1/groups/{g}/offsets/reset (dry_run
// true: nothing is committed) and shows current -> new offsets with the lag
// after; "Apply" sends the same request with dry_run false. "Shift by" is
// planned here from the committed offsets and committed with POST .../offsets.
function resetPanel(name, rows, signal, reload) {
  const base = '/v1/groups/' + seg(name) + '/offsets';
  const topics = [...new Set(rows.map(o => o.topic))];
  const topicSel = h('select', { name: 'topic' }, h('option', { value: '' }, 'All committed partitions'), topics.map(t => h('option', { value: t }, t)));
  const strat = h('select', { name: 'strategy' }, [['earliest', 'To earliest'], ['latest', 'To latest'], ['timestamp', 'To time'], ['offset', 'To offset'], ['shift', 'Shift by']].map(([v, l]) => h('option', { value: v }, l)));
  const val = h('input', { type: 'number', name: 'value', value: '0' });
  const ts = h('input', { type: 'datetime-local', name: 'time', step: 1 });
  const valField = field('Offset / shift', val);
  const tsField = field('Time (local)', ts);
  const preview = h('div', { 'aria-live': 'polite' });
  let plan = null;
  const sync = () => { valField.hidden = !['offset', 'shift'].includes(strat.value); tsField.hidden = strat.value !== 'timestamp'; };
  strat.addEventListener('change', sync);
  sync();
  // request is the API call for the current form: a server-side reset, or a
  // commit of the locally planned shift.
  const request = (dryRun) => {
    if (strat.value === 'shift') {
      return { method: 'POST', path: base, body: { offsets: (plan || []).map(o => ({ topic: o.topic, partition: o.partition, offset: o.target })) } };
    }
    const body = { strategy: strat.value, dry_run: dryRun };
    if (topicSel.value) body.topics = [topicSel.value];
    if (strat.value === 'offset') body.offset = Math.max(0, Number(val.value) || 0);
    if (strat.value === 'timestamp') body.timestamp = ts.value ? new Date(ts.value).getTime() : 0;
    return { method: 'POST', path: base + '/reset', body };
  };
  const apply = async () => {
    const ok = await confirmDialog({ title: 'Reset offsets?', message: `Commit ${plan.length} new offsets for group ${name}. The group must have no active members.`, confirmLabel: 'Reset offsets', danger: true, extra: curlButton(() => request(false)) });
    if (!ok) return;
    try {
      const r = request(false);
      await post(r.path, r.body);
      toast('Offsets reset.');
      replace(preview, h('p', { class: 'notice' }, `Committed ${plan.length} new offsets.`));
      plan = null;
      reload();
    } catch (e) { replace(preview, errorBox(e)); }
  };
  const dryRun = async (e) => {
    e.preventDefault();
    try {
      const sel = rows.filter(o => !topicSel.value || o.topic === topicSel.value);
      const info = new Map();
      for (const t of new Set(sel.map(o => o.topic).concat(topicSel.value ? [topicSel.value] : []))) info.set(t, await get('/v1/topics/' + seg(t), null, { signal }));
      if (strat.value === 'shift') {
        plan = planReset(sel, 'shift', val.value, info, new Map());
      } else {
        const r = request(true);
        const res = await post(r.path, r.body);
        plan = plannedRows(res.offsets || [], info);
      }
      replace(preview, h('h3', null, 'Dry run: nothing committed yet'), table([
        { label: 'Topic', get: o => o.topic },
        { label: 'Partition', num: true, get: o => String(o.partition) },
        { label: 'Current', num: true, get: o => (o.committed < 0 ? 'none' : fmtNum(o.committed)) },
        { label: 'New', num: true, get: o => [fmtNum(o.target), o.clamped ? h('span', { class: 'badge warn' }, ' clamped') : null] },
        { label: 'Lag after', num: true, get: o => fmtNum(o.newLag) },
      ], plan, { rowClass: o => (o.target !== o.committed ? 'warn' : null), empty: 'Nothing to reset.' }),
      h('div', { class: 'row' }, h('button', { type: 'button', class: 'danger', onClick: apply, 'data-test': 'apply-reset', disabled: plan.length === 0 }, 'Apply reset'),
        curlButton(() => request(false))));
    } catch (err) { if (err.name !== 'AbortError') replace(preview, errorBox(err)); }
  };
  return h('form', { class: 'panel', 'aria-label': 'Reset offsets', onSubmit: dryRun },
    h('h2', null, 'Reset offsets'),
    h('div', { class: 'grid-form' }, field('Topic', topicSel), field('Strategy', strat), valField, tsField,
      h('div', { class: 'row' }, h('button', { type: 'submit', class: 'ghost', 'data-test': 'dry-run' }, 'Preview (dry run)'),
        curlButton(() => request(true), 'Copy dry run as curl'))),
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
  const card = (k, v, cls, test) => h('div', { class: 'card ' + (cls || '') }, h('div', { class: 'k' }, k), h('div', { class: 'v', 'data-test': test }, v));
  const draw = (desc) => {
    const rows = offsetsOf(desc);
    replace(live,
      h('div', { class: 'cards' },
        card('State', desc.state || '—', desc.state === 'Stable' || desc.state === 'Empty' ? '' : 'warn', 'group-state'),
        card('Members', fmtNum(Array.isArray(desc.members) ? desc.members.length : 0)),
        card('Total lag', fmtNum(totalLag(desc)), totalLag(desc) > 0 ? 'warn' : '', 'group-lag'),
        card('Generation', fmtNum(desc.generation)),
        card('Coordinator', desc.coordinator === undefined ? '—' : 'broker ' + desc.coordinator),
        card('Assignor', desc.protocol || '—', 'text')),
      h('h2', null, 'Members'), membersTable(desc),
      h('h2', null, 'Offsets and lag'), offsetsTable(rows));
    return rows;
  };
  const refresh = async () => {
    const desc = await optional(get(path, null, { signal: ctx.signal }));
    if (desc) draw(desc);
  };
  const rows = draw(d);
  replace(resetSlot, resetPanel(groupName(d) || name, rows, ctx.signal, refresh));
  const delBtn = h('button', { type: 'button', class: 'ghost danger', onClick: async () => {
    const ok = await confirmDialog({ title: 'Delete group?', message: `Group ${name} and its committed offsets will be deleted. Only a group without active members can be deleted.`,
      confirmLabel: 'Delete', danger: true, typeToConfirm: name, extra: curlButton(() => ({ method: 'DELETE', path })) });
    if (!ok) return;
    try {
      await del(path);
      toast(`Group ${name} deleted.`);
      location.hash = '#/groups';
    } catch (e) { toast(e.message, 'error'); }
  } }, 'Delete group');
  head[1].append(delBtn);
  replace(root, ...head, live, chartSlot, resetSlot);
  ctx.every(5000, async () => {
    await refresh();
    const s = await optional(get('/v1/stats/series', null, { signal: ctx.signal })).catch(() => null);
    const gs = s && (s.groups || []).find(x => x.group === name);
    if (gs) replace(chartSlot, h('h2', null, 'Lag, last hour'), h('div', { class: 'charts' }, lineChart({ title: 'Total lag (records)', startMs: s.start_ms, intervalMs: s.interval_ms, series: [{ name: 'lag', values: gs.lag }] })));
  });
}
