// REST client for the public API. The API root is the directory above the one
// the UI is served from (/ui/ -> /), so the UI works behind a path prefix too.

export function apiBase() {
  return new URL('../', document.baseURI).href.replace(/\/$/, '');
}

// connection shows in the header whether the server answers.
function connection(ok) {
  const el = typeof document !== 'undefined' && document.getElementById('conn');
  if (!el) return;
  el.textContent = ok ? '' : 'Server unreachable, retrying…';
  el.classList.toggle('down', !ok);
}

export class ApiError extends Error {
  constructor(status, problem, message) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.problem = problem;
  }
}

// url builds an absolute URL for path and query (undefined/'' values dropped).
export function url(path, query) {
  const u = new URL(apiBase() + path);
  for (const [k, v] of Object.entries(query || {})) {
    if (v === undefined || v === null || v === '') continue;
    u.searchParams.set(k, String(v));
  }
  return u.href;
}

// seg escapes one path segment (topic and group names).
export const seg = encodeURIComponent;

// The session's CSRF token (session.js), sent on every change: the session
// cookie alone does not authorize one.
let csrfToken = '';
export function setCSRFToken(t) { csrfToken = t || ''; }

export async function request(method, path, { query, body, signal } = {}) {
  const init = { method, headers: { Accept: 'application/json, application/problem+json', 'X-Runnel-UI': '1' }, signal };
  if (method !== 'GET' && csrfToken) init.headers['X-CSRF-Token'] = csrfToken;
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(url(path, query), init);
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    connection(false);
    throw new ApiError(0, null, 'network error: ' + e.message);
  }
  connection(true);
  const text = await res.text();
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch { data = text; }
  }
  if (res.status === 401 && path !== '/v1/session' && typeof location !== 'undefined' && !location.hash.startsWith('#/login')) {
    location.hash = '#/login'; // logged out, or the node restarted
  }
  if (!res.ok) {
    const problem = data && typeof data === 'object' ? data : { title: res.statusText, detail: String(data || '') };
    throw new ApiError(res.status, problem, `${method} ${path}: ${res.status} ${problem.title || ''} ${problem.detail || ''}`.trim());
  }
  return data;
}

export const get = (path, query, opts = {}) => request('GET', path, { ...opts, query });
export const post = (path, body, query) => request('POST', path, { body, query });
export const patch = (path, body) => request('PATCH', path, { body });
export const del = (path) => request('DELETE', path);

// optional returns null instead of throwing on 404 (endpoints that a given
// server version may not have yet, such as consumer groups).
export async function optional(promise) {
  try {
    return await promise;
  } catch (e) {
    if (e instanceof ApiError && (e.status === 404 || e.status === 405 || e.status === 501)) return null;
    throw e;
  }
}
