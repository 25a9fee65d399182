// Produce one message: key, value (text, JSON or base64), headers, partition
// (or let the key's murmur2 hash choose). Calls POST /v1/topics/{t}/records.
import { h, field, errorBox, toast } from './dom.js';
import { post, seg } from './api.js';
import { curlButton } from './curl.js';
import { kvEditor } from './forms.js';
import { partitionFor } from './murmur2.js';
import { bytesToB64 } from './records.js';

const ENCODINGS = [
  ['string', 'Text (encoding=string)'],
  ['json', 'JSON (encoding=json)'],
  ['base64', 'Base64 bytes (encoding=base64)'],
];

export function produceForm(topic, onProduced) {
  const n = (topic.partitions || []).length;
  const key = h('input', { type: 'text', name: 'key', class: 'mono', autocomplete: 'off', placeholder: 'no key' });
  const value = h('textarea', { name: 'value', class: 'mono', rows: 6, placeholder: '{"hello": "world"}' });
  const enc = h('select', { name: 'encoding' }, ENCODINGS.map(([v, l]) => h('option', { value: v }, l)));
  const part = h('select', { name: 'partition' }, h('option', { value: '' }, 'By key (murmur2) / any'),
    (topic.partitions || []).map(p => h('option', { value: String(p.partition) }, 'Partition ' + p.partition)));
  const headers = kvEditor({ keyLabel: 'Header name', valueLabel: 'Header value', addLabel: 'Add header', name: 'header' });
  const hint = h('small', { class: 'muted', 'aria-live': 'polite' });
  const status = h('div', { role: 'status' });
  const updateHint = () => {
    hint.textContent = part.value === '' && key.value !== '' && n > 0 ? `Key "${key.value}" goes to partition ${partitionFor(key.value, n)}.` : '';
  };
  key.addEventListener('input', updateHint);
  part.addEventListener('change', updateHint);

  const request = () => {
    const rec = {};
    // In base64 mode only the value is typed as base64; key and header values
    // are typed as text and encoded here.
    const b64 = (text) => (enc.value === 'base64' ? bytesToB64(new TextEncoder().encode(text)) : text);
    if (key.value !== '') rec.key = b64(key.value);
    if (enc.value === 'json') {
      rec.value = value.value.trim() === '' ? null : JSON.parse(value.value);
    } else {
      rec.value = value.value;
    }
    const hs = headers.get();
    if (hs.length) rec.headers = Object.fromEntries(hs.map(([k, v]) => [k, b64(v)]));
    if (part.value !== '') rec.partition = Number(part.value);
    return { method: 'POST', path: '/v1/topics/' + seg(topic.name) + '/records', query: { encoding: enc.value }, body: { records: [rec] } };
  };

  return h('form', {
    'aria-label': 'Produce a message',
    onSubmit: async (e) => {
      e.preventDefault();
      status.replaceChildren();
      let req;
      try {
        req = request();
      } catch (err) {
        status.replaceChildren(errorBox(new Error('The value is not valid JSON: ' + err.message)));
        return;
      }
      try {
        const res = await post(req.path, req.body, req.query);
        const o = (res.offsets || [])[0] || {};
        toast(`Produced to partition ${o.partition} at offset ${o.offset}.`);
        status.replaceChildren(h('p', { class: 'notice', 'data-test': 'produced' },
          `Written to partition ${o.partition} at offset ${o.offset}. `,
          h('button', { type: 'button', class: 'small ghost', onClick: () => onProduced(o.partition, o.offset) }, 'Show in browser')));
      } catch (err) {
        status.replaceChildren(errorBox(err));
      }
    },
  },
  h('div', { class: 'grid-form' },
    field('Key', key), field('Partition', part), field('Value format', enc),
    h('div', { class: 'wide' }, field('Value', value)),
    h('div', { class: 'wide' }, h('fieldset', null, h('legend', null, 'Headers'), headers.el))),
  hint,
  h('div', { class: 'row' }, h('button', { type: 'submit', 'data-test': 'produce' }, 'Produce'), curlButton(() => {
    try { return request(); } catch { return { method: 'POST', path: '/v1/topics/' + seg(topic.name) + '/records', body: { records: [] } }; }
  })),
  status);
}
