// Unit tests of the UI's pure modules, run by web_test.go with node:
//   node unit.mjs <dir holding a copy of static/js> <murmur2 input json>
// Prints one JSON object: {"partitions": [...], "failures": [...]}.
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { join } from 'node:path';

const [dir, inputPath] = process.argv.slice(2);
const load = (m) => import(pathToFileURL(join(dir, m)).href);
const failures = [];
const eq = (name, got, want) => {
  const g = JSON.stringify(got);
  const w = JSON.stringify(want);
  if (g !== w) failures.push(`${name}: got ${g}, want ${w}`);
};

const { partitionFor } = await load('murmur2.js');
const input = JSON.parse(readFileSync(inputPath, 'utf8'));
const partitions = input.keys.map((b64) => {
  const key = Uint8Array.from(Buffer.from(b64, 'base64'));
  return input.counts.map((n) => partitionFor(key, n));
});
// A string key is hashed as its UTF-8 bytes.
eq('string key', partitionFor('héllo', 12), partitionFor(new TextEncoder().encode('héllo'), 12));

const rec = await load('records.js');
const bytes = (s) => new TextEncoder().encode(s);
eq('classify json', rec.classify(bytes('{"a":1}')).kind, 'json');
eq('classify text', rec.classify(bytes('hello world')).kind, 'text');
eq('classify binary', rec.classify(Uint8Array.from([0, 159, 146, 150])).kind, 'binary');
eq('classify invalid utf8', rec.classify(Uint8Array.from([0xc3, 0x28])).kind, 'binary');
eq('classify null', rec.classify(null).kind, 'null');
eq('render pretty', rec.render(bytes('{"a":[1,2]}')), '{\n  "a": [\n    1,\n    2\n  ]\n}');
eq('render hex', rec.render(Uint8Array.from([0, 1, 0xab, 0xff, 0x10])), '0001 abff 10');
eq('render base64', rec.render(bytes('hi!'), 'base64'), 'aGkh');
eq('render binary auto is hex', rec.render(Uint8Array.from([0, 255])), '00ff');
eq('b64 roundtrip', Array.from(rec.b64ToBytes(rec.bytesToB64(Uint8Array.from([1, 2, 250])))), [1, 2, 250]);
const decoded = rec.decodeRecord({ partition: 2, offset: 7, timestamp: '2026-01-02T03:04:05.006Z', key: 'aw==', value: null, headers: { h: 'dg==' } });
eq('decode key', Array.from(decoded.key), [107]);
eq('decode null value', decoded.value, null);
eq('decode header', [decoded.headers[0][0], Array.from(decoded.headers[0][1])], ['h', [118]]);
eq('jsonl text', JSON.parse(rec.toJSONLine(decoded)), { partition: 2, offset: 7, timestamp: '2026-01-02T03:04:05.006Z', key: 'k', value: null, headers: { h: 'v' } });
const bin = rec.decodeRecord({ partition: 0, offset: 1, timestamp: 5, key: null, value: 'AP8=', headers: {} });
eq('jsonl binary', JSON.parse(rec.toJSONLine(bin)), { partition: 0, offset: 1, timestamp: 5, key: null, value: 'AP8=', headers: {}, value_encoding: 'base64' });
// "transactional": true survives decoding and export; absent stays absent.
const txn = rec.decodeRecord({ partition: 0, offset: 3, timestamp: 5, key: null, value: null, headers: {}, transactional: true });
eq('transactional', [txn.transactional, decoded.transactional], [true, false]);
eq('jsonl transactional', JSON.parse(rec.toJSONLine(txn)), { partition: 0, offset: 3, timestamp: 5, key: null, value: null, headers: {}, transactional: true });
// header_list keeps repeated and binary names, in order; the headers object cannot.
const listed = rec.decodeRecord({ partition: 0, offset: 2, timestamp: 5, key: null, value: null, headers: { t: 'Yg==' },
  header_list: [{ key: 't', value: 'YQ==', key_encoding: 'string', value_encoding: 'base64' },
    { key: 't', value: 'b', key_encoding: 'string', value_encoding: 'string' },
    { key: '//4=', value: null, key_encoding: 'base64', value_encoding: 'base64' }] });
eq('header_list', listed.headers.map(([k, v]) => [k, v && Array.from(v)]), [['t', [97]], ['t', [98]], ['//4=', null]]);
eq('timestamp rfc3339', rec.timestampMs('1970-01-01T00:00:01.5Z'), 1500);

const g = await load('groups.js');
const desc = { offsets: [{ topic: 'b', partition: 1, committed_offset: 5, end_offset: 9 }, { topic: 'a', partition: 0, committed_offset: -1, end_offset: 3 }] };
eq('offsetsOf', g.offsetsOf(desc).map(o => [o.topic, o.partition, o.lag]), [['a', 0, undefined], ['b', 1, 4]]);
eq('totalLag', g.totalLag(desc), 4);
const info = new Map([['b', { partitions: [{ partition: 1, start_offset: 2, high_watermark: 9 }] }]]);
const rows = g.offsetsOf({ offsets: [{ topic: 'b', partition: 1, committed_offset: 5, end_offset: 9 }] });
const plan = (s, v) => g.planReset(rows, s, v, info, new Map()).map(o => [o.target, o.newLag, o.clamped]);
eq('reset earliest', plan('earliest'), [[2, 7, false]]);
eq('reset latest', plan('latest'), [[9, 0, false]]);
eq('reset shift back', plan('shift', -2), [[3, 6, false]]);
eq('reset shift clamped', plan('shift', -10), [[2, 7, true]]);
eq('reset offset clamped', plan('offset', 100), [[9, 0, true]]);
const planned = g.plannedRows([{ topic: 'b', partition: 1, current_offset: 5, new_offset: 9 }, { topic: 'z', partition: 0, current_offset: -1, new_offset: 0 }], info);
eq('plannedRows', planned.map(o => [o.committed, o.target, o.newLag]), [[5, 9, 0], [-1, 0, undefined]]);
eq('assignment', g.assignmentOf({ assignment: [{ topic: 't', partitions: [0, 2] }] }), 't: 0, 2');

const chart = await load('chart.js');
eq('niceScale', [0.42, 1, 2.5, 7, 12, 950, 1001].map(v => { const s = chart.niceScale(v); return [+s.max.toFixed(6), +s.step.toFixed(6)]; }),
  [[0.6, 0.2], [1, 0.5], [3, 1], [8, 2], [15, 5], [1000, 500], [1500, 500]]);
eq('perSecond', chart.perSecond([10, -1, null], 5000), [2, null, null]);

const main = await load('main.js');
const route = (hash) => { const r = main.parseRoute(hash); return [r.nav, r.params]; };
eq('route empty', route(''), ['cluster', {}]);
eq('route topics', route('#/topics'), ['topics', {}]);
eq('route topic', route('#/topics/orders.v1'), ['topics', { topic: 'orders.v1' }]);
eq('route topic tab', route('#/topics/a%2Fb?tab=tail'), ['topics', { topic: 'a/b', tab: 'tail' }]);
eq('route group', route('#/groups/billing'), ['groups', { group: 'billing' }]);
eq('route cluster', route('#/cluster'), ['cluster', {}]);

const topics = await load('pages/topics.js');
// 10 s buckets from t=0; now is 5 s into the last one (70-80 s): the rate
// covers buckets 10-80 s (70 records) over the 65 s from 10 s to now.
eq('recentRate', topics.recentRate([100, 10, 10, 10, 10, 10, 10, 10], 0, 10000, 75000), 70 * 1000 / 65000);
eq('recentRate empty', topics.recentRate([], 0, 10000, 1), undefined);

const cluster = await load('pages/cluster.js');
const health = cluster.partitionHealth([{ name: 't', partitions: [
  { partition: 0, leader: 1, replicas: [1, 2], isr: [1, 2] },
  { partition: 1, leader: 2, replicas: [2, 1], isr: [2] },
  { partition: 2, leader: -1, replicas: [1], isr: [] },
  { partition: 3, leader: 3, replicas: [3], isr: [3] },
] }], [{ id: 1, state: 'alive' }, { id: 2, state: 'alive' }, { id: 3, state: 'fenced' }]);
eq('health problems', health.problems.map(p => [p.partition, p.offline, p.under]), [[1, false, true], [2, true, true], [3, true, false]]);
eq('health per broker', [...health.perBroker.entries()].sort(), [[1, { partitions: 3, leaders: 1 }], [2, { partitions: 2, leaders: 1 }], [3, { partitions: 1, leaders: 1 }]]);

const tail = await load('tail.js');
eq('parseEventID', [...tail.parseEventID('2:7,0:-1,1:12')], [[2, 7], [0, -1], [1, 12]]);
eq('parseEventID junk', [...tail.parseEventID('x:1,:,3')], []);
eq('resumeQuery', tail.resumeQuery({ offset: 'latest', encoding: 'base64' }, new Map([[0, 9], [1, 4]])), { offset: 5, encoding: 'base64' });
eq('resumeQuery nothing seen', tail.resumeQuery({ offset: 'latest' }, new Map()), { offset: 'latest' });

const td = { partitions: [{ partition: 0, start_offset: 2, high_watermark: 10 }, { partition: 1, start_offset: 0, high_watermark: 0 }] };
eq('startPositions latest', [...tail.startPositions(td, 'latest', '')], [[0, 9], [1, -1]]);
eq('startPositions earliest one', [...tail.startPositions(td, 'earliest', '0')], [[0, 1]]);

process.stdout.write(JSON.stringify({ partitions, failures }));
