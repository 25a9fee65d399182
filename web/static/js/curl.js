// "Copy as curl": every action in the UI can show the equivalent API call.
import { h } from './dom.js';
import { url } from './api.js';

function shellQuote(s) {
  return "'" + String(s).replace(/'/g, `'\\''`) + "'";
}

// curlCommand renders a request as a copy-pasteable curl command line.
export function curlCommand(method, path, { query, body, stream } = {}) {
  const parts = ['curl'];
  if (stream) parts.push('-N');
  if (method !== 'GET') parts.push('-X', method);
  parts.push(shellQuote(url(path, query)));
  if (body !== undefined) {
    parts.push('-H', shellQuote('Content-Type: application/json'));
    parts.push('-d', shellQuote(JSON.stringify(body)));
  }
  return parts.join(' ');
}

export async function copyText(text) {
  if (navigator.clipboard && window.isSecureContext) {
    try { await navigator.clipboard.writeText(text); return true; } catch { /* fall back */ }
  }
  const ta = h('textarea', { class: 'offscreen', readonly: true }, text);
  document.body.append(ta);
  ta.select();
  let ok = false;
  try { ok = document.execCommand('copy'); } catch { ok = false; }
  ta.remove();
  return ok;
}

// curlButton returns a button that reveals the command (computed lazily from
// spec(), so it reflects the form's current values) with a copy button.
export function curlButton(spec, label = 'Copy as curl') {
  const out = h('div', { class: 'curl', hidden: true });
  const btn = h('button', {
    type: 'button', class: 'ghost small', 'aria-expanded': 'false',
    onClick: async () => {
      const s = spec();
      const cmd = curlCommand(s.method || 'GET', s.path, s);
      const pre = h('pre', { tabindex: 0 }, h('code', null, cmd));
      const status = h('span', { class: 'muted', role: 'status' });
      out.replaceChildren(pre, h('button', {
        type: 'button', class: 'small', onClick: async () => {
          status.textContent = (await copyText(cmd)) ? 'Copied.' : 'Select the text and copy it.';
        },
      }, 'Copy'), ' ', status);
      out.hidden = false;
      btn.setAttribute('aria-expanded', 'true');
      const ok = await copyText(cmd);
      status.textContent = ok ? 'Copied to clipboard.' : '';
    },
  }, label);
  return h('span', { class: 'curl-wrap' }, btn, out);
}
