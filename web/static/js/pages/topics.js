// #/topics: list with search, partitions, replication, size and produce rate;
// create (name, partitions, replication factor, configs); delete with
// confirmation. Calls GET/POST /v1/topics, DELETE /v1/topics/{t},
// GET /v1/stats/series (optional, for throughput).
//
// The list comes in pages of PAGE topics. While everything fits in one page
// the search matches anywhere in a name, in the browser; once the server says
// more follow, the search becomes a name prefix asked of the server and
// Previous/Next walk the pages, so a cluster with 100,000 topics costs one
// page per refresh.
import * as session from '../session.js';
import { h, replace, table, fmtBytes, fmtNum, fmtRate, field, toast, errorBox } from '../dom.js';
import { get, post, del, optional, seg } from '../api.js';
import { curlButton } from '../curl.js';
import { kvEditor, confirmDialog } from '../forms.js';

// recentRate is the per-second rate over about the last minute of a series:
// the last buckets (the one in progress included) divided by the time they
// cover up to now.
export function recentRate(values, startMs, intervalMs, nowMs) {
  if (!values || values.length === 0 || !intervalMs) return undefined;
  const k = Math.min(values.length, Math.ceil(60000 / intervalMs) + 1);
  const from = startMs + (values.length - k) * intervalMs;
  const elapsed = Math.max(intervalMs * (k - 1), nowMs - from);
  let sum = 0;
  for (const v of values.slice(-k)) sum += Math.max(0, v || 0);
  return (sum * 1000) / elapsed;
}

function createForm(onCreated) {
  const name = h('input', { type: 'text', required: true, class: 'mono', name: 'name', autocomplete: 'off', pattern: '[a-zA-Z0-9._\\-]+', maxlength: 249 });
  const parts = h('input', { type: 'number', min: 1, value: '1', name: 'partitions' });
  const rf = h('input', { type: 'number', min: 1, value: '1', name: 'replication_factor' });
  const configs = kvEditor({ keyLabel: 'Config name', valueLabel: 'Value', addLabel: 'Add config', name: 'config' });
  const status = h('div', { role: 'status' });
  const body = () => ({
    name: name.value.trim(),
    partitions: Number(parts.value) || 1,
    replication_factor: Number(rf.value) || 1,
    configs: Object.fromEntries(configs.get()),
  });
  const form = h('form', {
    class: 'panel', 'aria-label': 'Create topic',
    onSubmit: async (e) => {
      e.preventDefault();
      status.replaceChildren();
      try {
        const b = body();
        await post('/v1/topics', b);
        toast(`Topic ${b.name} created.`);
        name.value = '';
        onCreated(b.name);
      } catch (err) {
        status.replaceChildren(errorBox(err));
      }
    },
  },
  h('h2', null, 'Create topic'),
  h('div', { class: 'grid-form' },
    field('Name', name), field('Partitions', parts), field('Replication factor', rf),
    h('div', { class: 'wide' }, h('fieldset', null, h('legend', null, 'Configs (optional)'), configs.el,
      h('small', { class: 'muted' }, 'e.g. retention.ms, cleanup.policy, segment.bytes, min.insync.replicas')))),
  h('div', { class: 'row' },
    h('button', { type: 'submit', 'data-test': 'create-topic' }, 'Create topic'),
    curlButton(() => ({ method: 'POST', path: '/v1/topics', body: body() }))),
  status);
  return form;
}

export const PAGE = 500;

export async function render(root, params, ctx) {
  const search = h('input', { type: 'search', placeholder: 'Filter topics', 'aria-label': 'Filter topics', value: params.q || '' });
  const internal = h('input', { type: 'checkbox', id: 'show-internal' });
  const list = h('div');
  const formSlot = h('div', { hidden: true });
  const toggle = h('button', { type: 'button', 'aria-expanded': 'false', 'data-test': 'new-topic' }, 'New topic');
  const prev = h('button', { type: 'button', class: 'ghost small', 'data-test': 'topics-prev' }, 'Previous');
  const next = h('button', { type: 'button', class: 'ghost small', 'data-test': 'topics-next' }, 'Next');
  const pageLabel = h('span', { class: 'muted' });
  const pager = h('div', { class: 'row toolbar', hidden: true, 'data-test': 'topics-pager' }, prev, pageLabel, next);
  let topics = [];
  let perms = {}; // topic -> the operations the caller may perform (session.js)
  let series = null;
  let paged = false; // the server has more than one page: search by prefix there
  let cursors = ['']; // cursor of each page seen; the last is the current one
  let nextCursor = '';

  const draw = () => {
    const q = search.value.trim().toLowerCase();
    const shown = topics.filter(t => (internal.checked || !t.internal) && (paged || t.name.toLowerCase().includes(q)));
    pager.hidden = !paged;
    prev.disabled = cursors.length === 1;
    next.disabled = !nextCursor;
    pageLabel.textContent = 'Page ' + cursors.length;
    search.placeholder = paged ? 'Name starts with' : 'Filter topics';
    const rate = new Map((series?.topics || []).map(s => [s.topic, s]));
    replace(list, table([
      { label: 'Name', get: t => h('a', { href: '#/topics/' + seg(t.name) }, t.name, t.internal ? h('span', { class: 'badge' }, ' internal') : null) },
      { label: 'Partitions', num: true, get: t => fmtNum(t.partitions) },
      { label: 'Replication', num: true, get: t => fmtNum(t.replication_factor) },
      { label: 'Size', num: true, get: t => (t.size_bytes ? fmtBytes(t.size_bytes) : '—') },
      { label: 'In (1 min)', num: true, get: t => fmtRate(recentRate(rate.get(t.name)?.produced_records, series?.start_ms, series?.interval_ms, Date.now())) },
      { label: 'Out (1 min)', num: true, get: t => fmtRate(recentRate(rate.get(t.name)?.consumed_records, series?.start_ms, series?.interval_ms, Date.now())) },
      { label: '', get: t => ((perms[t.name] || []).includes('delete') ? h('button', {
        type: 'button', class: 'ghost danger small', 'aria-label': 'Delete topic ' + t.name,
        onClick: () => deleteTopic(t.name, load),
      }, 'Delete') : null) },
    ], shown, {
      caption: paged ? `${shown.length} topics on page ${cursors.length}${nextCursor ? ', more follow' : ''}` : `${shown.length} of ${topics.length} topics`,
      empty: q ? 'No topic matches the filter.' : 'No topics yet. Create one.',
    }));
  };
  const load = async () => {
    try {
      const query = { limit: Number(params.limit) > 0 ? Number(params.limit) : PAGE }; // #/topics?limit=N
      const cursor = cursors[cursors.length - 1];
      if (cursor) query.cursor = cursor;
      if (paged && search.value.trim()) query.prefix = search.value.trim();
      const res = await get('/v1/topics', query, { signal: ctx.signal });
      topics = res.topics || [];
      perms = await session.operations('topic', topics.map(t => t.name));
      nextCursor = res.next_cursor || '';
      if (nextCursor) paged = true;
      series = await optional(get('/v1/stats/series', null, { signal: ctx.signal })).catch(() => null);
      draw();
    } catch (e) {
      if (e.name !== 'AbortError') replace(list, errorBox(e));
    }
  };
  toggle.addEventListener('click', () => {
    formSlot.hidden = !formSlot.hidden;
    toggle.setAttribute('aria-expanded', String(!formSlot.hidden));
    if (!formSlot.hidden) formSlot.querySelector('input')?.focus();
  });
  replace(formSlot, createForm((name) => { location.hash = '#/topics/' + seg(name); }));
  let typing = null;
  search.addEventListener('input', () => {
    if (!paged) { draw(); return; }
    clearTimeout(typing);
    typing = setTimeout(() => { cursors = ['']; load(); }, 250);
  });
  prev.addEventListener('click', () => { if (cursors.length > 1) { cursors.pop(); load(); } });
  next.addEventListener('click', () => { if (nextCursor) { cursors.push(nextCursor); load(); } });
  internal.addEventListener('change', draw);
  replace(root,
    h('div', { class: 'row' }, h('h1', null, 'Topics'), h('span', { class: 'spacer' }), toggle, curlButton(() => ({ path: '/v1/topics' }))),
    formSlot,
    h('div', { class: 'row toolbar' }, search, h('label', { for: 'show-internal', class: 'row' }, internal, 'Show internal')),
    list, pager);
  if (params.create !== undefined) toggle.click();
  ctx.every(10000, load);
}

export async function deleteTopic(name, after) {
  const ok = await confirmDialog({
    title: 'Delete topic?',
    message: `Topic ${name} and all its records will be deleted. This cannot be undone.`,
    confirmLabel: 'Delete', danger: true, typeToConfirm: name,
    extra: curlButton(() => ({ method: 'DELETE', path: '/v1/topics/' + seg(name) })),
  });
  if (!ok) return false;
  try {
    await del('/v1/topics/' + seg(name));
    toast(`Topic ${name} deleted.`);
    if (after) await after();
    return true;
  } catch (e) {
    toast(e.message, 'error');
    return false;
  }
}
