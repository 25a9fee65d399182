// #/groups: consumer groups with state, members and total lag.
// Calls GET /v1/groups (lag sampled by the coordinators every 10 s); a 404 or
// 501 (a server without groups) shows "no groups".
import { h, replace, table, fmtNum, errorBox } from '../dom.js';
import { get, optional, seg } from '../api.js';
import { curlButton } from '../curl.js';
import { groupName, totalLag } from '../groups.js';

export async function render(root, params, ctx) {
  const search = h('input', { type: 'search', placeholder: 'Filter groups', 'aria-label': 'Filter groups' });
  const list = h('div');
  let groups = null;
  const draw = () => {
    if (groups === null) {
      replace(list, h('p', { class: 'notice', 'data-test': 'no-groups' }, 'No consumer groups: this server does not report groups yet.'));
      return;
    }
    const q = search.value.trim().toLowerCase();
    const shown = groups.filter(g => groupName(g).toLowerCase().includes(q));
    replace(list, table([
      { label: 'Group', get: g => h('a', { href: '#/groups/' + seg(groupName(g)) }, groupName(g)) },
      { label: 'State', get: g => h('span', { class: 'badge' }, g.state || '—') },
      { label: 'Members', num: true, get: g => fmtNum(Array.isArray(g.members) ? g.members.length : g.members ?? g.member_count) },
      { label: 'Type', get: g => g.protocol_type || '—' },
      { label: 'Assignor', get: g => g.protocol || '—' },
      { label: 'Coordinator', num: true, get: g => (g.coordinator === undefined ? '—' : String(g.coordinator)) },
      { label: 'Lag', num: true, get: g => fmtNum(totalLag(g)) },
    ], shown, { caption: shown.length === 1 ? '1 group' : `${shown.length} groups`, empty: 'No consumer groups.' }));
  };
  search.addEventListener('input', draw);
  replace(root, h('div', { class: 'row' }, h('h1', null, 'Consumer groups'), h('span', { class: 'spacer' }), curlButton(() => ({ path: '/v1/groups' }))),
    h('div', { class: 'row toolbar' }, search), list);
  ctx.every(5000, async () => {
    try {
      const res = await optional(get('/v1/groups', null, { signal: ctx.signal }));
      groups = res === null ? null : (Array.isArray(res) ? res : res.groups || []);
      draw();
    } catch (e) {
      if (e.name !== 'AbortError') replace(list, errorBox(e));
    }
  });
}
