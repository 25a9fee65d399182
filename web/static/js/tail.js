// Live tail over Server-Sent Events: GET /v1/topics/{t}/records/stream
// (query partitions, offset, encoding). Each "record" event is one record; its
// id holds "partition:offset" pairs, so when EventSource reconnects by itself
// and sends Last-Event-ID the server resumes without loss or duplicates. The
// UI also drops any partition:offset it has already shown. An "error" event
// carries a problem and ends the stream.
import { h, replace, field, fmtNum } from './dom.js';
import { url, seg } from './api.js';
import { curlButton } from './curl.js';
import { decodeRecord } from './records.js';
import { recordView } from './browser.js';

const KEEP = 200; // records kept on screen

export function liveTail(topic, signal) {
  const path = '/v1/topics/' + seg(topic.name) + '/records/stream';
  const partSel = h('select', { name: 'partition' }, h('option', { value: '' }, 'All partitions'),
    (topic.partitions || []).map(p => h('option', { value: String(p.partition) }, 'Partition ' + p.partition)));
  const fromSel = h('select', { name: 'from' }, h('option', { value: 'latest' }, 'New records only'), h('option', { value: 'earliest' }, 'From the beginning'));
  const modeSel = h('select', { name: 'view' }, ['auto', 'text', 'hex', 'base64'].map(m => h('option', { value: m }, m)));
  const toggle = h('button', { type: 'button', 'data-test': 'tail-toggle' }, 'Start');
  const state = h('span', { class: 'badge', role: 'status', 'data-test': 'tail-state' }, 'stopped');
  const count = h('span', { class: 'muted' });
  const list = h('div', { class: 'records', 'aria-live': 'off', 'data-test': 'tail-records' });
  let es = null;
  let seen = new Set();
  let total = 0;

  const query = () => ({ offset: fromSel.value, encoding: 'base64', partitions: partSel.value });
  const setState = (text, cls) => { state.textContent = text; state.className = 'badge ' + cls; };
  const onRecord = (ev) => {
    let data;
    try { data = JSON.parse(ev.data); } catch { return; }
    const recs = Array.isArray(data.records) ? data.records : [data];
    for (const raw of recs) {
      const r = decodeRecord(raw);
      const id = `${r.partition}:${r.offset}`;
      if (seen.has(id)) continue;
      seen.add(id);
      total++;
      list.prepend(recordView(r, modeSel.value, true));
      while (list.children.length > KEEP) list.lastElementChild.remove();
    }
    if (seen.size > 10 * KEEP) seen = new Set([...seen].slice(-KEEP * 2));
    count.textContent = `${fmtNum(total)} records received`;
  };
  const stop = () => {
    if (es) es.close();
    es = null;
    toggle.textContent = 'Start';
    setState('stopped', '');
  };
  const start = () => {
    stop();
    es = new EventSource(url(path, query()));
    toggle.textContent = 'Stop';
    setState('connecting', 'warn');
    es.addEventListener('open', () => setState('live', 'good'));
    es.addEventListener('error', (ev) => {
      if (!es) return;
      if (ev.data) { // a problem sent by the server: the stream is over
        let p = {};
        try { p = JSON.parse(ev.data); } catch { /* keep the raw text */ }
        stop();
        setState('ended: ' + (p.title || ev.data), 'bad');
        return;
      }
      setState(es.readyState === EventSource.CLOSED ? 'closed' : 'reconnecting', 'bad');
    });
    es.addEventListener('message', onRecord);
    es.addEventListener('record', onRecord);
  };
  toggle.addEventListener('click', () => (es ? stop() : start()));
  for (const el of [partSel, fromSel]) el.addEventListener('change', () => { if (es) { seen = new Set(); replace(list); start(); } });
  signal.addEventListener('abort', stop, { once: true });
  const box = h('div', null,
    h('div', { class: 'grid-form' }, field('Partitions', partSel), field('Start', fromSel), field('Show values as', modeSel),
      h('div', { class: 'row' }, toggle, state, curlButton(() => ({ path, query: query(), stream: true })))),
    h('p', null, count),
    list);
  start();
  return box;
}
