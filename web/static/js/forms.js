// Shared form pieces: key/value rows (configs, headers) and confirmation.
import { h } from './dom.js';

// kvEditor edits a list of [key, value] pairs; get() returns the non-empty ones.
export function kvEditor({ keyLabel = 'Key', valueLabel = 'Value', initial = [], addLabel = 'Add', name = 'kv' }) {
  const rows = h('div', { class: 'kv-rows' });
  const add = (k = '', v = '') => {
    const ki = h('input', { type: 'text', 'aria-label': keyLabel, placeholder: keyLabel, value: k, class: 'mono', name: name + '-key' });
    const vi = h('input', { type: 'text', 'aria-label': valueLabel, placeholder: valueLabel, value: v, class: 'mono', name: name + '-value' });
    const row = h('div', { class: 'kv-row' }, ki, vi,
      h('button', { type: 'button', class: 'ghost small', 'aria-label': 'Remove ' + keyLabel.toLowerCase(), onClick: () => row.remove() }, '✕'));
    rows.append(row);
    return ki;
  };
  for (const [k, v] of initial) add(k, v);
  const el = h('div', null, rows, h('button', { type: 'button', class: 'ghost small', onClick: () => add().focus() }, addLabel));
  return {
    el,
    get() {
      const out = [];
      for (const row of rows.children) {
        const [ki, vi] = row.querySelectorAll('input');
        if (ki.value.trim() !== '') out.push([ki.value.trim(), vi.value]);
      }
      return out;
    },
  };
}

// confirmDialog asks for confirmation; with typeToConfirm the user must type
// that text first (used before deleting a topic). Resolves true or false.
export function confirmDialog({ title, message, confirmLabel = 'Confirm', danger = false, typeToConfirm, extra }) {
  return new Promise((resolve) => {
    const input = typeToConfirm ? h('input', { type: 'text', class: 'mono', 'aria-label': 'Type ' + typeToConfirm + ' to confirm', autocomplete: 'off' }) : null;
    const ok = h('button', { type: 'submit', class: danger ? 'danger' : '', disabled: !!typeToConfirm }, confirmLabel);
    if (input) input.addEventListener('input', () => { ok.disabled = input.value !== typeToConfirm; });
    const dlg = h('dialog', { 'aria-labelledby': 'dlg-title' },
      h('form', { method: 'dialog' },
        h('h2', { id: 'dlg-title' }, title),
        h('p', null, message),
        input ? h('p', null, 'Type ', h('code', null, typeToConfirm), ' to confirm:') : null,
        input,
        extra ? h('p', null, extra) : null,
        h('div', { class: 'row' }, h('span', { class: 'spacer' }),
          h('button', { type: 'button', class: 'ghost', onClick: () => dlg.close('cancel') }, 'Cancel'), ok)));
    dlg.addEventListener('close', () => { dlg.remove(); resolve(dlg.returnValue !== 'cancel' && dlg.returnValue !== ''); });
    ok.value = 'ok';
    document.body.append(dlg);
    dlg.showModal();
    (input || ok).focus();
  });
}
