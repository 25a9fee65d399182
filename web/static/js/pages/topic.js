// #/topics/{topic}: partitions (leader, replicas, ISR, offsets, size), the
// open transactions writing to the topic (hidden when none) and, in
// tabs, the message browser (default: newest messages), produce, live tail,
// configs and charts. Tab deep links: #/topics/{topic}?tab=produce|tail|configs|charts
// (&tail=paused: the live tail without its stream until Start).
// Calls GET /v1/topics/{t}, GET /v1/transactions, PATCH /v1/topics/{t}/configs, DELETE /v1/topics/{t}
// and, through the tab modules, the records and stream endpoints.
import { h, replace, table, fmtBytes, fmtNum, fmtTime, errorBox, toast } from '../dom.js';
import { get, patch, seg, optional } from '../api.js';
import { curlButton } from '../curl.js';
import { kvEditor } from '../forms.js';
import { deleteTopic } from './topics.js';
import { messageBrowser } from '../browser.js';
import { produceForm } from '../produce.js';
import * as session from '../session.js';
import { liveTail } from '../tail.js';
import { lineChart, perSecond } from '../chart.js';

function partitionsTable(t) {
  const parts = t.partitions || [];
  return table([
    { label: 'Partition', num: true, get: p => String(p.partition) },
    { label: 'Leader', num: true, get: p => (p.leader === -1 ? h('span', { class: 'badge bad' }, 'offline') : String(p.leader)) },
    { label: 'Epoch', num: true, get: p => fmtNum(p.leader_epoch) },
    { label: 'Replicas', get: p => (p.replicas || []).join(', ') },
    { label: 'ISR', get: p => h('span', null, (p.isr || []).join(', '),
      (p.isr || []).length < (p.replicas || []).length ? h('span', { class: 'badge warn' }, ' under-replicated') : null) },
    { label: 'Start offset', num: true, get: p => fmtNum(p.start_offset) },
    { label: 'End offset', num: true, get: p => fmtNum(p.end_offset) },
    { label: 'High watermark', num: true, get: p => fmtNum(p.high_watermark) },
    { label: 'Records', num: true, get: p => fmtNum(Math.max(0, (p.high_watermark ?? p.end_offset) - p.start_offset)) },
    { label: 'Size', num: true, get: p => (p.size_bytes ? fmtBytes(p.size_bytes) : '—') },
  ], parts, { stack: false, caption: parts.length === 1 ? '1 partition' : `${parts.length} partitions`, rowClass: p => (p.leader === -1 ? 'bad' : (p.isr || []).length < (p.replicas || []).length ? 'warn' : null) });
}

// Transactions that are still open: their records are past the last stable
// offset, so read committed consumers wait on them.
const OPEN_STATES = new Set(['Ongoing', 'PrepareCommit', 'PrepareAbort', 'PrepareEpochFence']);

// openTransactions lists the open transactions with a partition of topic
// (GET /v1/transactions, DescribeTransactions data); null when there are
// none or the server has no transaction coordinator.
async function openTransactions(topic, signal) {
  const res = await optional(get('/v1/transactions', null, { signal }));
  const txns = ((res && res.transactions) || [])
    .filter(x => OPEN_STATES.has(x.state) && (x.partitions || []).some(p => p.topic === topic));
  if (txns.length === 0) return null;
  return h('section', { 'data-test': 'open-transactions', 'aria-label': 'Open transactions' },
    h('h2', null, 'Open transactions'),
    table([
      { label: 'Transactional id', get: x => h('span', { class: 'mono' }, x.transactional_id) },
      { label: 'Producer id', num: true, get: x => String(x.producer_id) },
      { label: 'Epoch', num: true, get: x => String(x.producer_epoch) },
      { label: 'State', get: x => h('span', { class: 'badge warn' }, x.state) },
      { label: 'Started', get: x => (x.start_ms >= 0 ? fmtTime(x.start_ms) : '—') },
      { label: 'Partitions', get: x => (x.partitions || []).filter(p => p.topic === topic).map(p => p.partition).sort((a, b) => a - b).join(', ') },
    ], txns, { stack: false, caption: txns.length === 1 ? '1 open transaction' : `${txns.length} open transactions` }));
}

function configsPanel(t, reload) {
  const path = '/v1/topics/' + seg(t.name) + '/configs';
  const initial = Object.entries(t.configs || {}).sort();
  const editor = kvEditor({ keyLabel: 'Config name', valueLabel: 'Value', initial, addLabel: 'Add config', name: 'config' });
  const status = h('div', { role: 'status' });
  // body sets every listed config and resets (null) the ones removed.
  const body = () => {
    const now = Object.fromEntries(editor.get());
    const configs = { ...now };
    for (const [k] of initial) if (!(k in now)) configs[k] = null;
    return { configs };
  };
  return h('form', {
    'aria-label': 'Edit configs',
    onSubmit: async (e) => {
      e.preventDefault();
      status.replaceChildren();
      try {
        await patch(path, body());
        toast('Configs saved.');
        reload();
      } catch (err) {
        status.replaceChildren(errorBox(err));
      }
    },
  },
  h('p', { class: 'muted' }, 'Configs set on this topic; anything not listed has the broker default. Remove a row to reset it.'),
  editor.el,
  h('div', { class: 'row' }, h('button', { type: 'submit' }, 'Save configs'), curlButton(() => ({ method: 'PATCH', path, body: body() }))),
  status);
}

async function chartsPanel(t, signal) {
  const s = await optional(get('/v1/stats/series', null, { signal }));
  if (!s) return h('p', { class: 'muted' }, 'This server does not expose /v1/stats/series.');
  const ts = (s.topics || []).find(x => x.topic === t.name);
  if (!ts) return h('p', { class: 'muted' }, 'No traffic recorded for this topic in the last hour.');
  return h('div', { class: 'charts' },
    lineChart({ title: 'Records per second', startMs: s.start_ms, intervalMs: s.interval_ms, unit: '/s', series: [
      { name: 'produced', values: perSecond(ts.produced_records, s.interval_ms) },
      { name: 'consumed', values: perSecond(ts.consumed_records, s.interval_ms) }] }),
    lineChart({ title: 'Bytes per second', startMs: s.start_ms, intervalMs: s.interval_ms, unit: 'B/s', series: [
      { name: 'produced', values: perSecond(ts.produced_bytes, s.interval_ms) },
      { name: 'consumed', values: perSecond(ts.consumed_bytes, s.interval_ms) }] }));
}

const TABS = [
  ['messages', 'Messages'], ['produce', 'Produce'], ['tail', 'Live tail'], ['configs', 'Configs'], ['charts', 'Charts'],
];

function tabs(active, onSelect, hidden) {
  const buttons = TABS.filter(([id]) => id !== hidden).map(([id, label]) => h('button', {
    type: 'button', role: 'tab', id: 'tab-' + id, 'aria-controls': 'tabpanel',
    'aria-selected': String(id === active), tabindex: id === active ? '0' : '-1',
    onClick: () => onSelect(id),
  }, label));
  const bar = h('div', { role: 'tablist', class: 'tabs', 'aria-label': 'Topic views' }, buttons);
  bar.addEventListener('keydown', (e) => {
    const i = buttons.indexOf(document.activeElement);
    if (i < 0) return;
    const j = e.key === 'ArrowRight' ? (i + 1) % buttons.length : e.key === 'ArrowLeft' ? (i - 1 + buttons.length) % buttons.length : -1;
    if (j >= 0) { e.preventDefault(); buttons[j].focus(); buttons[j].click(); }
  });
  return bar;
}

export async function render(root, params, ctx) {
  const name = params.topic;
  const path = '/v1/topics/' + seg(name);
  let t;
  try {
    t = await get(path, null, { signal: ctx.signal });
  } catch (e) {
    replace(root, h('p', { class: 'crumbs' }, h('a', { href: '#/topics' }, 'Topics')), h('h1', null, name), errorBox(e));
    return;
  }
  const partsSlot = h('div', null, partitionsTable(t));
  const refresh = async () => {
    t = await get(path, null, { signal: ctx.signal });
    replace(partsSlot, partitionsTable(t));
    return t;
  };
  ctx.every(5000, () => refresh());
  // Open transactions on this topic; the slot stays empty when none.
  const txnSlot = h('div');
  const refreshTxns = async () => {
    try {
      const el = await openTransactions(name, ctx.signal);
      if (el) replace(txnSlot, el); else txnSlot.replaceChildren();
    } catch (e) {
      // A failed request shows in the header (api.js); the slot just empties.
      if (e.name !== 'AbortError') txnSlot.replaceChildren();
    }
  };
  ctx.every(5000, refreshTxns);

  const panel = h('div', { role: 'tabpanel', id: 'tabpanel', tabindex: '0' });
  let tabCtx = null;
  ctx.onClose(() => tabCtx && tabCtx.abort());
  const select = async (id) => {
    if (tabCtx) tabCtx.abort();
    tabCtx = new AbortController();
    for (const b of root.querySelectorAll('[role="tab"]')) {
      const on = b.id === 'tab-' + id;
      b.setAttribute('aria-selected', String(on));
      b.tabIndex = on ? 0 : -1;
    }
    panel.setAttribute('aria-labelledby', 'tab-' + id);
    const sig = tabCtx.signal;
    history.replaceState(null, '', '#/topics/' + seg(name) + (id === 'messages' ? '' : '?tab=' + id));
    try {
      if (id === 'messages') replace(panel, messageBrowser(t, sig, refresh, params));
      if (id === 'produce') replace(panel, produceForm(t, (p, off) => {
        params = { partition: String(p), offset: String(off) };
        select('messages');
      }));
      if (id === 'tail') replace(panel, liveTail(t, sig, { paused: params.tail === 'paused' }));
      if (id === 'configs') replace(panel, configsPanel(t, async () => { await refresh(); select('configs'); }));
      if (id === 'charts') replace(panel, await chartsPanel(t, sig));
    } catch (e) {
      if (e.name !== 'AbortError') replace(panel, errorBox(e));
    }
  };
  // Only the actions the caller may perform (session.js asks the server).
  const ops = (await session.operations('topic', [name]))[name] || [];
  if (!ops.includes('write')) root.dataset.readonly = 'true';
  const active = TABS.some(([id]) => id === params.tab && (id !== 'produce' || ops.includes('write'))) ? params.tab : 'messages';
  replace(root,
    h('p', { class: 'crumbs' }, h('a', { href: '#/topics' }, 'Topics'), ' /'),
    h('div', { class: 'row' }, h('h1', null, name), t.internal ? h('span', { class: 'badge' }, 'internal') : null,
      h('span', { class: 'spacer' }),
      curlButton(() => ({ path })),
      ops.includes('delete') ? h('button', { type: 'button', class: 'ghost danger', 'data-test': 'delete-topic', onClick: async () => { if (await deleteTopic(name)) location.hash = '#/topics'; } }, 'Delete topic') : null),
    h('p', { class: 'muted' }, 'Replication factor ', String(t.replication_factor ?? '—'), t.id ? [' · id ', h('code', null, t.id)] : null),
    partsSlot,
    txnSlot,
    tabs(active, select, ops.includes('write') ? null : 'produce'),
    panel);
  select(active);
}
