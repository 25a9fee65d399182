// #/cluster: the Raft quorum (controllers: role, term, commit index, leader),
// the brokers (state, rack, epoch, partitions, leaders) and partition health.
// Calls GET /v1/cluster, GET /v1/topics, GET /v1/topics/{t} (for partition
// health), GET /v1/kafka/api-versions (optional).
import { h, replace, table, fmtNum, errorBox } from '../dom.js';
import { get, optional, seg } from '../api.js';
import { curlButton } from '../curl.js';

const ROLE = { leader: 'good', follower: 'accent', candidate: 'warn' };
const STATE = { alive: 'good', fenced: 'bad', shutting_down: 'warn' };

// badge shows text in the colour map gives kind (default: text itself).
function badge(text, map, kind = text) {
  return h('span', { class: 'badge ' + (map[kind] || '') }, text || 'unknown');
}

// partitionHealth describes every partition and counts replicas per broker.
export function partitionHealth(details, brokers) {
  const alive = new Set(brokers.filter(b => b.state === 'alive').map(b => b.id));
  const perBroker = new Map();
  const problems = [];
  let total = 0;
  for (const t of details) {
    for (const p of t.partitions || []) {
      total++;
      for (const r of p.replicas || []) {
        const c = perBroker.get(r) || { partitions: 0, leaders: 0 };
        c.partitions++;
        if (r === p.leader) c.leaders++;
        perBroker.set(r, c);
      }
      const offline = p.leader === -1 || p.leader === undefined || (alive.size > 0 && !alive.has(p.leader));
      const under = (p.isr || []).length < (p.replicas || []).length;
      if (offline || under) problems.push({ topic: t.name, ...p, offline, under });
    }
  }
  return { total, perBroker, problems };
}

async function loadDetails(topics, signal) {
  const out = [];
  const list = topics.slice(0, 300);
  for (let i = 0; i < list.length; i += 8) {
    const batch = list.slice(i, i + 8).map(t => get('/v1/topics/' + seg(t.name), null, { signal }).catch(() => null));
    out.push(...(await Promise.all(batch)).filter(Boolean));
  }
  return out;
}

function controllersTable(c) {
  return table([
    // The Raft role already says which controller leads: no second column.
    { label: 'ID', get: x => String(x.id) },
    { label: 'Address', get: x => h('code', null, x.address || '—') },
    { label: 'Raft role', get: x => badge(x.id === c.leader_id ? '★ leader' : x.role, ROLE, x.role) },
    { label: 'Term', num: true, get: x => fmtNum(x.term) },
    { label: 'Last index', num: true, get: x => fmtNum(x.last_index) },
    { label: 'Commit index', num: true, get: x => fmtNum(x.commit_index) },
  ], c.controllers || [], { empty: 'No controller information.' });
}

function brokersTable(brokers, health) {
  return table([
    { label: 'ID', get: b => String(b.id) },
    { label: 'State', get: b => badge(b.state, STATE) },
    { label: 'Rack', get: b => b.rack || '—' },
    { label: 'Epoch', num: true, get: b => fmtNum(b.epoch) },
    { label: 'Metadata offset', num: true, get: b => fmtNum(b.metadata_offset) },
    { label: 'Partitions', num: true, get: b => fmtNum(b.partitions || health.perBroker.get(b.id)?.partitions || 0) },
    { label: 'Leaders', num: true, get: b => fmtNum(b.leaders || health.perBroker.get(b.id)?.leaders || 0) },
    { label: 'HTTP', get: b => h('code', null, b.http_address || '—') },
    { label: 'Kafka', get: b => h('code', null, b.kafka_address || '—') },
    // From each broker's last heartbeat: its disks refuse writes.
    { label: 'Storage', get: b => (b.storage_error ? h('span', { class: 'badge bad', title: b.storage_error }, 'disk failing') : '') },
  ], brokers, { rowClass: b => (b.state === 'fenced' || b.storage_error ? 'bad' : b.state === 'shutting_down' ? 'warn' : null), empty: 'No brokers registered.' });
}

function problemsTable(health) {
  if (health.problems.length === 0) {
    return h('p', { class: 'notice', 'data-test': 'partitions-ok' }, `All ${health.total} partitions are online and fully replicated.`);
  }
  return table([
    { label: 'Topic', get: p => h('a', { href: '#/topics/' + seg(p.topic) }, p.topic) },
    { label: 'Partition', num: true, get: p => String(p.partition) },
    { label: 'Problem', get: p => (p.offline ? h('span', { class: 'badge bad' }, 'offline') : h('span', { class: 'badge warn' }, 'under-replicated')) },
    { label: 'Leader', num: true, get: p => String(p.leader) },
    { label: 'Replicas', get: p => (p.replicas || []).join(', ') },
    { label: 'ISR', get: p => (p.isr || []).join(', ') },
  ], health.problems, { rowClass: p => (p.offline ? 'bad' : 'warn') });
}

function card(k, v, cls) {
  return h('div', { class: 'card ' + (cls || '') }, h('div', { class: 'k' }, k), h('div', { class: 'v' }, v));
}

function apiVersions(list) {
  const rows = Array.isArray(list) ? list : (list && (list.apis || list.api_versions)) || [];
  if (!rows.length) return null;
  return h('details', { class: 'panel' }, h('summary', null, `Kafka listener: ${rows.length} API keys`),
    table([
      { label: 'Key', num: true, get: a => String(a.api_key) },
      { label: 'Name', get: a => a.name },
      { label: 'Versions', get: a => `${a.min_version}–${a.max_version}` },
    ], rows, { stack: false }));
}

export async function render(root, params, ctx) {
  const body = h('div');
  replace(root, h('div', { class: 'row' }, h('h1', null, 'Cluster'), h('span', { class: 'spacer' }),
    curlButton(() => ({ path: '/v1/cluster' }))), body);
  const versions = await optional(get('/v1/kafka/api-versions', null, { signal: ctx.signal })).catch(() => null);
  ctx.every(5000, async () => {
    let c;
    try {
      c = await get('/v1/cluster', null, { signal: ctx.signal });
    } catch (e) {
      if (e.name !== 'AbortError') replace(body, errorBox(e));
      return;
    }
    const tl = await get('/v1/topics', { limit: 300 }, { signal: ctx.signal }); // loadDetails looks at 300 at most
    const details = await loadDetails(tl.topics || [], ctx.signal);
    const brokers = c.brokers || [];
    const health = partitionHealth(details, brokers);
    const leader = (c.controllers || []).find(x => x.id === c.leader_id);
    const offline = health.problems.filter(p => p.offline).length;
    const under = health.problems.filter(p => !p.offline && p.under).length;
    replace(body,
      h('p', { class: 'muted' }, 'Cluster id ', h('code', { 'data-test': 'cluster-id' }, c.cluster_id)),
      c.node?.storage_error ? h('p', { class: 'notice bad', 'data-test': 'storage-error' }, 'Writes refused on this node: ', c.node.storage_error) : null,
      h('div', { class: 'cards' },
        card('Controller leader', c.leader_id === -1 ? 'none' : String(c.leader_id), c.leader_id === -1 ? 'bad' : ''),
        card('Raft term', leader ? fmtNum(leader.term) : '—'),
        card('Commit index', leader ? fmtNum(leader.commit_index) : '—'),
        card('Brokers alive', `${brokers.filter(b => b.state === 'alive').length} / ${brokers.length}`),
        card('Topics', fmtNum((tl.topics || []).length)),
        card('Partitions', fmtNum(health.total)),
        card('Under-replicated', fmtNum(under), under ? 'warn' : ''),
        card('Offline', fmtNum(offline), offline ? 'bad' : '')),
      h('h2', null, 'Metadata quorum'), controllersTable(c),
      h('h2', null, 'Brokers'), brokersTable(brokers, health),
      h('h2', null, 'Partition health'), problemsTable(health),
      apiVersions(versions));
  });
}
