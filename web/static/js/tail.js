// Live tail over Server-Sent Events: GET /v1/topics/{t}/records/stream
// (query partitions, offset, encoding). Each "record" event is one record; its
// id lists "partition:last offset" for every streamed partition. When the
// connection drops, EventSource reconnects by itself with Last-Event-ID and the
// server resumes without loss or duplicates. When EventSource gives up (the
// server answered a reconnect with an error status, e.g. while restarting), or
// when the connection drops before any event gave it an id to send, the UI
// reconnects itself from the positions it knows (the smallest next offset: a
// new EventSource cannot send Last-Event-ID) and drops what it has already
// shown, so nothing is lost or repeated either. Before the first event those
// positions are the high watermarks read when the tail started. An "error"
// event carries a problem and ends the stream.
import { h, replace, field, fmtNum } from './dom.js';
import { url, seg, get } from './api.js';
import { curlButton } from './curl.js';
import { decodeRecord } from './records.js';
import { recordView } from './browser.js';

const KEEP = 200; // records kept on screen
const MAX_BACKOFF = 10000;

// parseEventID reads "p:o,p:o" into a Map partition -> last delivered offset.
export function parseEventID(id) {
  const out = new Map();
  for (const pair of (id || '').split(',')) {
    const [p, o] = pair.split(':');
    if (p === undefined || o === undefined || p.trim() === '' || o.trim() === '') continue;
    const pn = Number(p);
    const on = Number(o);
    if (Number.isInteger(pn) && Number.isInteger(on)) out.set(pn, on);
  }
  return out;
}

// resumeQuery is the query that restarts a stream after the positions in
// last (partition -> last delivered offset): one offset for all partitions, so
// the smallest next offset; records already shown are dropped by the caller.
export function resumeQuery(base, last) {
  if (last.size === 0) return base;
  return { ...base, offset: Math.min(...[...last.values()].map(o => o + 1)) };
}

// startPositions maps each streamed partition to the offset before its first
// record to show: high watermark - 1 from "latest", log start - 1 from "earliest".
export function startPositions(topicDetail, from, partition) {
  const out = new Map();
  for (const p of topicDetail.partitions || []) {
    if (partition !== '' && String(p.partition) !== partition) continue;
    const hw = p.high_watermark ?? p.end_offset;
    out.set(p.partition, (from === 'earliest' ? p.start_offset : hw) - 1);
  }
  return out;
}

// With paused (the deep link ?tab=tail&tail=paused) it opens without a
// stream, Start begins one: a page with an open stream never goes network
// idle, which screenshot tools wait for.
export function liveTail(topic, signal, { paused = false } = {}) {
  const path = '/v1/topics/' + seg(topic.name) + '/records/stream';
  const partSel = h('select', { name: 'partition' }, h('option', { value: '' }, 'All partitions'),
    (topic.partitions || []).map(p => h('option', { value: String(p.partition) }, 'Partition ' + p.partition)));
  const fromSel = h('select', { name: 'from' }, h('option', { value: 'latest' }, 'New records only'), h('option', { value: 'earliest' }, 'From the beginning'));
  const modeSel = h('select', { name: 'view' }, [['auto', 'Auto (pretty JSON)'], ['text', 'Text'], ['hex', 'Hex'], ['base64', 'Base64']].map(([m, label]) => h('option', { value: m }, label)));
  const toggle = h('button', { type: 'button', 'data-test': 'tail-toggle' }, 'Start');
  const state = h('span', { class: 'badge', role: 'status', 'data-test': 'tail-state' }, 'stopped');
  const count = h('span', { class: 'muted' });
  const list = h('div', { class: 'records', 'aria-live': 'off', 'data-test': 'tail-records' });
  let es = null;
  let retry = null; // timer of a UI-side reconnect
  let backoff = 1000;
  // last: partition -> last offset delivered, from the event ids (only moves
  // forward). A record at or below it was shown already (a replay after a
  // UI-side reconnect) and is dropped.
  let last = new Map();
  let total = 0;

  const query = () => ({ offset: fromSel.value, encoding: 'base64', partitions: partSel.value });
  const setState = (text, cls) => { state.textContent = text; state.className = 'badge ' + cls; };
  const onRecord = (ev) => {
    let data;
    try { data = JSON.parse(ev.data); } catch { return; }
    const recs = Array.isArray(data.records) ? data.records : [data];
    const fresh = recs.map(decodeRecord).filter(r => !(last.has(r.partition) && r.offset <= last.get(r.partition)));
    for (const [p, o] of parseEventID(ev.lastEventId)) last.set(p, Math.max(o, last.has(p) ? last.get(p) : -1));
    for (const r of fresh) {
      last.set(r.partition, Math.max(r.offset, last.has(r.partition) ? last.get(r.partition) : -1));
      total++;
      list.prepend(recordView(r, modeSel.value, true));
      while (list.children.length > KEEP) list.lastElementChild.remove();
    }
    backoff = 1000;
    count.textContent = `${fmtNum(total)} records received`;
  };
  const close = () => {
    clearTimeout(retry);
    retry = null;
    if (es) es.close();
    es = null;
  };
  let gen = 0; // bumped by start and stop: a start overtaken by them gives up
  const stop = () => {
    gen++;
    close();
    toggle.textContent = 'Start';
    setState('stopped', '');
  };
  let hasID = false; // an event gave EventSource an id to resume with
  const connect = (q) => {
    close();
    const src = new EventSource(url(path, q));
    es = src;
    hasID = false;
    toggle.textContent = 'Stop';
    setState('connecting', 'warn');
    src.addEventListener('open', () => setState('live', 'good'));
    src.addEventListener('error', (ev) => {
      if (es !== src) return;
      if (ev.data) { // a problem sent by the server: the stream is over
        let p = {};
        try { p = JSON.parse(ev.data); } catch { /* keep the raw text */ }
        stop();
        // corrupt-batch names where the partition's records resume.
        const resume = p.next_offset !== undefined ? ` (partition ${p.partition}: records resume at offset ${p.next_offset})` : '';
        setState('ended: ' + (p.title || ev.data) + resume, 'bad');
        return;
      }
      setState('reconnecting', 'bad');
      if (src.readyState !== EventSource.CLOSED && hasID) return; // EventSource resumes by itself
      src.close();
      retry = setTimeout(() => connect(resumeQuery(query(), last)), backoff);
      backoff = Math.min(MAX_BACKOFF, backoff * 2);
    });
    const onEvent = (ev) => { if (ev.lastEventId) hasID = true; onRecord(ev); };
    src.addEventListener('message', onEvent);
    src.addEventListener('record', onEvent);
  };
  // start records where each partition stands (high watermark for "new
  // records only", log start for "from the beginning") before connecting.
  const start = async () => {
    const mine = ++gen;
    close();
    last = new Map();
    setState('connecting', 'warn');
    toggle.textContent = 'Stop';
    try {
      const t = await get('/v1/topics/' + seg(topic.name), null, { signal });
      last = startPositions(t, fromSel.value, partSel.value);
    } catch { /* unknown: a reconnect before the first event starts over */ }
    if (mine === gen && !signal.aborted) connect(query());
  };
  toggle.addEventListener('click', () => (es || retry ? stop() : start()));
  for (const el of [partSel, fromSel]) el.addEventListener('change', () => { if (es || retry) { replace(list); start(); } });
  signal.addEventListener('abort', stop, { once: true });
  const box = h('div', null,
    h('div', { class: 'grid-form' }, field('Partitions', partSel), field('Start', fromSel), field('Show values as', modeSel),
      h('div', { class: 'row' }, toggle, state, curlButton(() => ({ path, query: query(), stream: true })))),
    h('p', null, count),
    list);
  if (paused) setState('paused', '');
  else start();
  return box;
}
