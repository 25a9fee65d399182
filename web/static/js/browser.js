// The message browser: pick partition(s) and a start (newest N, earliest, an
// offset or a timestamp), page forward, find by key (murmur2 picks the one
// partition to search), render values (JSON pretty, text, hex, base64) and
// export the shown records as JSON lines. Records of a transaction carry a
// "transactional" badge; the isolation choice decides whether records of open
// and aborted transactions show (read uncommitted) or not (read committed,
// the server's default). In read uncommitted a toggle also shows the
// commit/abort markers (include_control=true) as rows of their own.
// Calls GET /v1/topics/{t}/partitions/{p}/records?offset|timestamp&max_records&encoding=base64&isolation[&include_control].
import { h, replace, field, fmtTime, fmtNum, errorBox } from './dom.js';
import { get, seg } from './api.js';
import { curlButton } from './curl.js';
import { partitionFor } from './murmur2.js';
import { decodeRecord, render as renderBytes, classify, toJSONLine, timestampMs, utf8 } from './records.js';

const PAGE = 500; // records per request when scanning

function recordsPath(topic, p) {
  return '/v1/topics/' + seg(topic) + '/partitions/' + p + '/records';
}

// fetchPartition reads up to max records of one partition from a position.
export async function fetchPartition(topic, p, pos, max, signal, isolation, markers = false) {
  const query = { max_records: max, encoding: 'base64' };
  if (isolation) query.isolation = isolation;
  if (markers && isolation === 'read_uncommitted') query.include_control = 'true';
  if (pos.timestamp !== undefined) query.timestamp = pos.timestamp;
  else query.offset = pos.offset;
  const res = await get(recordsPath(topic, p), query, { signal });
  return { records: (res.records || []).map(r => decodeRecord({ partition: p, ...r })), next: res.next_offset, hw: res.high_watermark };
}

function bytesEqual(a, b) {
  if (a === null || b === null) return a === b;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

// markerView renders a transaction marker: a row of its own, no body.
function markerView(r, fresh) {
  const c = r.control;
  return h('article', { class: 'record marker' + (fresh ? ' fresh' : ''), 'data-test': 'marker', 'data-marker': c.type, 'data-partition': r.partition, 'data-offset': r.offset },
    h('header', null,
      h('span', null, 'partition ', h('b', null, String(r.partition))),
      h('span', null, 'offset ', h('b', { class: 'mono' }, String(r.offset))),
      h('span', { class: 'mono' }, fmtTime(timestampMs(r.timestamp))),
      h('span', { class: 'badge ' + (c.type === 'commit' ? 'good' : 'bad'), title: 'Ends a transaction of this producer on the partition' }, c.type + ' marker'),
      h('span', { class: 'muted mono' }, `producer ${c.producer_id}, epoch ${c.producer_epoch}, coordinator epoch ${c.coordinator_epoch}`)));
}

// recordView renders one decoded record.
export function recordView(r, mode, fresh = false) {
  if (r.control) return markerView(r, fresh);
  const kind = classify(r.value).kind;
  const keyText = r.key === null ? h('span', { class: 'muted' }, 'null') : (utf8(r.key) ?? renderBytes(r.key, 'hex'));
  return h('article', { class: 'record' + (fresh ? ' fresh' : ''), 'data-partition': r.partition, 'data-offset': r.offset },
    h('header', null,
      h('span', null, 'partition ', h('b', null, String(r.partition))),
      h('span', null, 'offset ', h('b', { class: 'mono' }, String(r.offset))),
      h('span', { class: 'mono' }, fmtTime(timestampMs(r.timestamp))),
      h('span', { class: 'badge' }, kind),
      r.transactional ? h('span', { class: 'badge accent', 'data-test': 'txn-badge', title: 'Written in a transaction' }, 'transactional') : null),
    h('div', { class: 'body' },
      h('span', null, 'key'), h('pre', { class: 'mono rec-key' }, keyText),
      r.headers.length ? [h('span', null, 'headers'), h('pre', { class: 'mono' }, r.headers.map(([k, v]) => `${k}: ${v === null ? 'null' : (utf8(v) ?? renderBytes(v, 'hex'))}`).join('\n'))] : null,
      h('span', null, 'value'), h('pre', { class: 'mono rec-value' }, renderBytes(r.value, mode))));
}

function download(name, text) {
  const a = h('a', { href: URL.createObjectURL(new Blob([text], { type: 'application/x-ndjson' })), download: name });
  document.body.append(a);
  a.click();
  setTimeout(() => { URL.revokeObjectURL(a.href); a.remove(); }, 1000);
}

export function messageBrowser(topic, signal, refreshTopic, params = {}) {
  const parts = (topic.partitions || []).map(p => p.partition);
  // Partitions as checkboxes: "All", or any set of them (a multi-select list
  // was tiny and needed Ctrl-click). Nothing picked means all of them.
  const allBox = h('input', { type: 'checkbox', name: 'partition', value: 'all', checked: params.partition === undefined });
  const partBoxes = parts.map(p => h('input', { type: 'checkbox', name: 'partition', value: String(p), checked: params.partition === String(p) }));
  const chip = (box, text) => h('label', { class: 'chip' }, box, text);
  const partSel = h('fieldset', { class: 'chips', 'data-test': 'partitions' }, h('legend', null, 'Partitions'),
    chip(allBox, 'All'), partBoxes.map((b, i) => chip(b, String(parts[i]))));
  allBox.addEventListener('change', () => {
    if (allBox.checked) for (const b of partBoxes) b.checked = false;
    else if (!partBoxes.some(b => b.checked)) allBox.checked = true;
  });
  for (const b of partBoxes) b.addEventListener('change', () => { allBox.checked = !partBoxes.some(x => x.checked); });
  const startSel = h('select', { name: 'start' },
    h('option', { value: 'newest' }, 'Newest'), h('option', { value: 'earliest' }, 'Earliest'),
    h('option', { value: 'offset', selected: params.offset !== undefined }, 'Offset'), h('option', { value: 'timestamp' }, 'Timestamp'));
  const offsetIn = h('input', { type: 'number', min: 0, name: 'offset', value: params.offset ?? '0', class: 'mono' });
  const tsIn = h('input', { type: 'datetime-local', name: 'timestamp', step: 1 });
  const limitIn = h('input', { type: 'number', min: 1, max: 5000, value: '50', name: 'limit' });
  const modeSel = h('select', { name: 'view' }, [['auto', 'Auto (pretty JSON)'], ['text', 'Text'], ['hex', 'Hex'], ['base64', 'Base64']].map(([m, label]) => h('option', { value: m }, label)));
  const isoSel = h('select', { name: 'isolation' },
    h('option', { value: 'read_committed' }, 'Read committed'), h('option', { value: 'read_uncommitted' }, 'Read uncommitted'));
  // Markers exist for read uncommitted only (the server refuses them in
  // read committed, as Kafka consumers never see them).
  const markersBox = h('input', { type: 'checkbox', name: 'markers', disabled: true });
  const markers = () => markersBox.checked && isoSel.value === 'read_uncommitted';
  isoSel.addEventListener('change', () => {
    markersBox.disabled = isoSel.value !== 'read_uncommitted';
    if (markersBox.disabled) markersBox.checked = false;
  });
  const keyIn = h('input', { type: 'text', name: 'key', placeholder: 'exact key', class: 'mono', autocomplete: 'off' });
  const offsetField = field('Offset', offsetIn);
  const tsField = field('From time (local)', tsIn);
  const status = h('div', { class: 'muted', role: 'status', 'aria-live': 'polite' });
  const list = h('div', { class: 'records', 'aria-label': 'Records' });
  const more = h('button', { type: 'button', class: 'ghost', hidden: true }, 'Load more');
  const exportBtn = h('button', { type: 'button', class: 'ghost', disabled: true }, 'Export JSON lines');
  let shown = [];
  let lastPos = {}; // start position per partition of the last load, for curl
  let cursor = null; // {partition: next offset} for "Load more"
  let op = null;

  const syncFields = () => {
    offsetField.hidden = startSel.value !== 'offset';
    tsField.hidden = startSel.value !== 'timestamp';
  };
  startSel.addEventListener('change', syncFields);
  syncFields();
  const selected = () => {
    const picked = partBoxes.filter(b => b.checked).map(b => Number(b.value));
    return allBox.checked || picked.length === 0 ? parts : picked;
  };
  const limit = () => Math.max(1, Math.min(5000, Number(limitIn.value) || 50));
  const draw = () => {
    replace(list, shown.map(r => recordView(r, modeSel.value)));
    exportBtn.disabled = shown.length === 0;
  };
  modeSel.addEventListener('change', draw);
  // begin cancels the running load or search and starts a new one; all of
  // them end with the tab (signal).
  const begin = () => {
    if (op) op.abort();
    op = new AbortController();
    return op.signal;
  };
  signal.addEventListener('abort', () => op && op.abort(), { once: true });
  const fail = (e) => { if (e.name !== 'AbortError') replace(status, errorBox(e)); };

  // startPositions resolves the start mode to a position per partition.
  const startPositions = (t) => {
    const n = limit();
    const pos = {};
    for (const p of t.partitions || []) {
      if (!selected().includes(p.partition)) continue;
      const hw = p.high_watermark ?? p.end_offset;
      if (startSel.value === 'newest') pos[p.partition] = { offset: Math.max(p.start_offset, hw - n) };
      else if (startSel.value === 'earliest') pos[p.partition] = { offset: 'earliest' };
      else if (startSel.value === 'offset') pos[p.partition] = { offset: Math.max(0, Number(offsetIn.value) || 0) };
      else pos[p.partition] = { timestamp: tsIn.value ? new Date(tsIn.value).getTime() : 0 };
    }
    return pos;
  };

  const load = async (append) => {
    const sig = begin();
    replace(status, 'Loading…');
    try {
      let pos;
      if (append && cursor) {
        pos = Object.fromEntries(Object.entries(cursor).map(([p, o]) => [p, { offset: o }]));
      } else {
        const t = await refreshTopic();
        pos = startPositions(t);
      }
      lastPos = pos;
      const n = limit();
      const results = await Promise.all(Object.entries(pos).map(([p, at]) => fetchPartition(topic.name, Number(p), at, n, sig, isoSel.value, markers())));
      let recs = results.flatMap(r => r.records);
      cursor = {};
      Object.keys(pos).forEach((p, i) => { cursor[p] = results[i].next; });
      const newest = startSel.value === 'newest' && !append;
      recs.sort((a, b) => (timestampMs(a.timestamp) - timestampMs(b.timestamp)) || (a.partition - b.partition) || (a.offset - b.offset));
      if (newest) recs = recs.slice(-n).reverse();
      else if (Object.keys(pos).length > 1) recs = recs.slice(0, n);
      shown = append ? shown.concat(recs) : recs;
      more.hidden = newest || results.every(r => r.records.length === 0 || r.next >= r.hw);
      const nMarkers = shown.filter(r => r.control).length;
      replace(status, `${shown.length - nMarkers} records` + (nMarkers ? ` and ${nMarkers} transaction markers` : '') + ' shown' + (newest ? ' (newest first)' : '') + '.');
      draw();
    } catch (e) { fail(e); }
  };

  const findByKey = async () => {
    const key = keyIn.value;
    if (key === '') { keyIn.focus(); return; }
    const sig = begin();
    try {
      const t = await refreshTopic();
      const p = partitionFor(key, (t.partitions || []).length);
      const info = t.partitions.find(x => x.partition === p);
      const want = new TextEncoder().encode(key);
      const hw = info.high_watermark ?? info.end_offset;
      let off = startSel.value === 'offset' ? Math.max(info.start_offset, Number(offsetIn.value) || 0) : info.start_offset;
      const found = [];
      let scanned = 0;
      while (off < hw && found.length < limit() && scanned < 200000) {
        replace(status, `Key "${key}" hashes (murmur2) to partition ${p}; scanning offsets ${fmtNum(off)} to ${fmtNum(hw)}… ${found.length} found.`);
        const res = await fetchPartition(t.name, p, { offset: off }, PAGE, sig, isoSel.value);
        if (res.records.length === 0) break;
        scanned += res.records.length;
        for (const r of res.records) if (bytesEqual(r.key, want)) found.push(r);
        off = res.next;
      }
      shown = found.slice(0, limit());
      cursor = null;
      more.hidden = true;
      replace(status, h('span', { 'data-test': 'find-result' }, `Key "${key}" → partition ${p} (murmur2). Scanned ${fmtNum(scanned)} records, found ${found.length}.`));
      draw();
    } catch (e) { fail(e); }
  };

  more.addEventListener('click', () => load(true));
  exportBtn.addEventListener('click', () => download(`${topic.name}.jsonl`, shown.map(toJSONLine).join('\n') + '\n'));
  const form = h('form', { class: 'browse-form', 'aria-label': 'Browse messages', onSubmit: (e) => { e.preventDefault(); load(false); } },
    partSel, field('Start at', startSel), offsetField, tsField, field('Max records', limitIn), field('Show values as', modeSel),
    field('Isolation', isoSel, 'Read uncommitted also shows records of open and aborted transactions.'),
    h('label', { class: 'chip', title: 'Read uncommitted only' }, markersBox, 'Show commit/abort markers'),
    h('div', { class: 'row' }, h('button', { type: 'submit', 'data-test': 'load-records' }, 'Load'),
      curlButton(() => {
        // The first selected partition, from where the last load started.
        const p = selected()[0] ?? 0;
        const at = lastPos[p] || { offset: 'earliest' };
        const query = { ...at, max_records: limit(), encoding: 'base64', isolation: isoSel.value };
        if (markers()) query.include_control = 'true';
        return { path: recordsPath(topic.name, p), query };
      })));
  const keyForm = h('form', { class: 'row end', 'aria-label': 'Find by key', onSubmit: (e) => { e.preventDefault(); findByKey(); } },
    field('Find by key', keyIn, 'Searches only the partition the key hashes to.'),
    h('button', { type: 'submit', class: 'ghost', 'data-test': 'find-key' }, 'Find'),
    curlButton(() => ({
      path: recordsPath(topic.name, keyIn.value === '' ? 0 : partitionFor(keyIn.value, parts.length)),
      query: { offset: 'earliest', max_records: PAGE, encoding: 'base64', isolation: isoSel.value },
    })));
  const box = h('div', null, form, keyForm, h('div', { class: 'row' }, status, h('span', { class: 'spacer' }), exportBtn), list, more);
  if (params.offset !== undefined) startSel.value = 'offset';
  syncFields();
  load(false);
  return box;
}
