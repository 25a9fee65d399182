// Record bytes as people want to read them: JSON pretty-printed, text as text,
// anything else as hex or base64. Records are fetched with encoding=base64 so
// the UI always sees the exact bytes, whatever produced them.

export function b64ToBytes(s) {
  if (s === null || s === undefined) return null;
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

export function bytesToB64(bytes) {
  if (bytes === null || bytes === undefined) return null;
  let bin = '';
  for (let i = 0; i < bytes.length; i += 0x8000) {
    bin += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  }
  return btoa(bin);
}

export function bytesToHex(bytes) {
  if (bytes === null || bytes === undefined) return null;
  let out = '';
  for (let i = 0; i < bytes.length; i++) {
    out += bytes[i].toString(16).padStart(2, '0');
    if (i % 2 === 1 && i !== bytes.length - 1) out += i % 16 === 15 ? '\n' : ' ';
  }
  return out;
}

// utf8 decodes bytes strictly; null when they are not valid UTF-8 text (or
// hold control characters other than whitespace, which means binary).
export function utf8(bytes) {
  if (bytes === null || bytes === undefined) return null;
  let text;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return null;
  }
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u0008\u000e-\u001f\u007f]/.test(text)) return null;
  return text;
}

// classify tells how a value is best shown: null, json, text or binary.
export function classify(bytes) {
  if (bytes === null || bytes === undefined) return { kind: 'null' };
  const text = utf8(bytes);
  if (text === null) return { kind: 'binary' };
  const t = text.trim();
  if (t && (t[0] === '{' || t[0] === '[' || t[0] === '"' || /^-?\d/.test(t) || t === 'true' || t === 'false' || t === 'null')) {
    try {
      return { kind: 'json', text, json: JSON.parse(t) };
    } catch { /* plain text */ }
  }
  return { kind: 'text', text };
}

// render returns the display string of bytes in a mode: auto, text, hex, base64.
export function render(bytes, mode = 'auto') {
  if (bytes === null || bytes === undefined) return 'null';
  if (mode === 'hex') return bytesToHex(bytes);
  if (mode === 'base64') return bytesToB64(bytes);
  const c = classify(bytes);
  if (mode === 'text') return c.text !== undefined ? c.text : bytesToHex(bytes);
  if (c.kind === 'json') return typeof c.json === 'object' && c.json !== null ? JSON.stringify(c.json, null, 2) : c.text;
  if (c.kind === 'text') return c.text;
  return bytesToHex(bytes);
}

// fieldBytes turns one wire field into bytes by its declared encoding
// (key_encoding, value_encoding, headers_encoding); records are requested
// with encoding=base64, which is also the default when no encoding is given.
function fieldBytes(v, enc) {
  if (v === null || v === undefined) return null;
  if (enc === 'json') return new TextEncoder().encode(JSON.stringify(v));
  if (enc === 'string') return new TextEncoder().encode(String(v));
  return b64ToBytes(v);
}

// decodeRecord turns a wire record into {partition, offset, timestamp, key,
// value, headers: [[name, bytes]]} with keys and values as Uint8Array or null.
export function decodeRecord(r) {
  const headers = [];
  const hs = r.headers || {};
  if (Array.isArray(r.header_list)) {
    // Every header in order, repeated and binary names included (the
    // headers object keeps one value per name).
    for (const x of r.header_list) {
      const name = x.key_encoding === 'base64' ? (utf8(b64ToBytes(x.key)) ?? x.key) : x.key;
      headers.push([name, fieldBytes(x.value, x.value_encoding)]);
    }
  } else if (Array.isArray(hs)) {
    for (const x of hs) headers.push([x.key, fieldBytes(x.value, r.headers_encoding)]);
  } else {
    for (const [k, v] of Object.entries(hs)) headers.push([k, fieldBytes(v, r.headers_encoding)]);
  }
  return {
    partition: r.partition,
    offset: r.offset,
    timestamp: r.timestamp,
    key: fieldBytes(r.key, r.key_encoding),
    value: fieldBytes(r.value, r.value_encoding),
    headers,
    transactional: r.transactional === true,
    control: r.control || null, // a commit/abort marker: {type, producer_id, ...}
  };
}

// toJSONLine renders one decoded record for export: text stays text (JSON
// values stay JSON), binary is base64 with a flag.
export function toJSONLine(r) {
  const enc = (b) => {
    if (b === null) return { v: null, bin: false };
    const t = utf8(b);
    return t === null ? { v: bytesToB64(b), bin: true } : { v: t, bin: false };
  };
  const k = enc(r.key);
  const v = enc(r.value);
  const headers = {};
  for (const [hk, hv] of r.headers) headers[hk] = enc(hv).v;
  const out = { partition: r.partition, offset: r.offset, timestamp: r.timestamp, key: k.v, value: v.v, headers };
  if (k.bin) out.key_encoding = 'base64';
  if (v.bin) out.value_encoding = 'base64';
  if (r.transactional) out.transactional = true;
  if (r.control) out.control = r.control;
  return JSON.stringify(out);
}

// timestampMs reads a record timestamp (RFC 3339 string or milliseconds).
export function timestampMs(ts) {
  if (typeof ts === 'number') return ts;
  const v = Date.parse(ts);
  return Number.isNaN(v) ? 0 : v;
}
