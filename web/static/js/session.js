// The caller's session: who is logged in, the CSRF token writes carry, and
// what the caller may do (GET /v1/session), so pages show only the actions
// the server would allow.
import { get, post, request, setCSRFToken } from './api.js';

let info = null;

// load asks the server who the caller is; null when it must log in.
export async function load() {
  try {
    info = await get('/v1/session');
  } catch {
    info = null;
  }
  setCSRFToken(info?.csrf_token);
  showUser();
  return info;
}

export async function login(body) {
  info = await post('/v1/session', body);
  setCSRFToken(info.csrf_token);
  showUser();
  return info;
}

export async function logout() {
  try { await request('DELETE', '/v1/session'); } catch { /* gone already */ }
  info = null;
  setCSRFToken('');
  location.hash = '#/login';
}

// operations returns, per name, the operations the caller may perform on
// those resources (every operation when the node runs without --auth).
export async function operations(resourceType, names) {
  const all = ['read', 'write', 'create', 'delete', 'alter', 'describe', 'describe_configs', 'alter_configs'];
  if (info && !info.auth_required) return Object.fromEntries(names.map(n => [n, all]));
  const u = new URLSearchParams({ resource_type: resourceType });
  for (const n of names.slice(0, 100)) u.append('resource_name', n);
  try {
    const res = await get('/v1/session?' + u.toString());
    return res.permissions || {};
  } catch {
    return {};
  }
}

export async function may(resourceType, name, op) {
  return ((await operations(resourceType, [name]))[name] || []).includes(op);
}

function showUser() {
  const el = typeof document !== 'undefined' && document.getElementById('user');
  if (!el) return;
  el.textContent = '';
  if (!info?.auth_required) return;
  el.append(info.principal.replace(/^User:/, ''), ' ');
  const b = document.createElement('button');
  b.type = 'button';
  b.className = 'ghost small';
  b.dataset.test = 'logout';
  b.textContent = 'Log out';
  b.addEventListener('click', logout);
  el.append(b);
}
