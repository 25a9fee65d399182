// Entry point: a hash router over the pages. Routes (DESIGN.md):
//   #/cluster  #/topics  #/topics/{topic}  #/groups  #/groups/{group}  #/charts
// Each page is render(root, params, ctx); ctx owns the page's timers, event
// sources and fetches and is closed when the route changes.
import { replace, errorBox } from './dom.js';
import { ApiError, get } from './api.js';
import * as cluster from './pages/cluster.js';
import * as topics from './pages/topics.js';
import * as topic from './pages/topic.js';
import * as groups from './pages/groups.js';
import * as group from './pages/group.js';
import * as charts from './pages/charts.js';
import * as login from './pages/login.js';
import * as session from './session.js';

export function parseRoute(hash) {
  const raw = (hash || '').replace(/^#/, '');
  const [path, qs] = raw.split('?');
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  const query = Object.fromEntries(new URLSearchParams(qs || ''));
  if (parts[0] === 'topics' && parts.length >= 2) return { page: topic, nav: 'topics', params: { topic: parts.slice(1).join('/'), ...query } };
  if (parts[0] === 'topics') return { page: topics, nav: 'topics', params: query };
  if (parts[0] === 'groups' && parts.length >= 2) return { page: group, nav: 'groups', params: { group: parts.slice(1).join('/'), ...query } };
  if (parts[0] === 'groups') return { page: groups, nav: 'groups', params: query };
  if (parts[0] === 'charts') return { page: charts, nav: 'charts', params: query };
  if (parts[0] === 'login') return { page: login, nav: 'login', params: query };
  return { page: cluster, nav: 'cluster', params: query };
}

class PageContext {
  constructor() {
    this.abort = new AbortController();
    this.cleanups = [];
    this.closed = false;
  }
  get signal() { return this.abort.signal; }
  onClose(fn) { this.cleanups.push(fn); }
  // every runs fn now and then every ms while the page is shown and visible.
  every(ms, fn) {
    let timer = null;
    const tick = async () => {
      if (this.closed) return;
      if (!document.hidden) {
        // Request failures show in the header (api.js); anything else is a bug.
        try { await fn(); } catch (e) { if (e.name !== 'AbortError' && !(e instanceof ApiError)) console.error(e); }
      }
      if (!this.closed) timer = setTimeout(tick, ms);
    };
    tick();
    this.onClose(() => clearTimeout(timer));
  }
  close() {
    this.closed = true;
    this.abort.abort();
    for (const fn of this.cleanups) { try { fn(); } catch (e) { console.error(e); } }
  }
}

let current = null;

function route() {
  const app = document.getElementById('app');
  if (current) current.close();
  const ctx = new PageContext();
  current = ctx;
  const r = parseRoute(location.hash);
  for (const a of document.querySelectorAll('[data-nav]')) {
    if (a.dataset.nav === r.nav) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  const what = r.params.topic || r.params.group || r.nav[0].toUpperCase() + r.nav.slice(1);
  document.title = what + ' · runnel';
  replace(app);
  Promise.resolve()
    .then(() => r.page.render(app, r.params, ctx))
    .catch(e => { if (!ctx.closed) replace(app, errorBox(e)); });
}

if (typeof window !== 'undefined' && typeof document !== 'undefined') {
  window.addEventListener('hashchange', route);
  if (!location.hash) history.replaceState(null, '', '#/cluster');
  // Who is logged in first: pages ask it what to show; a 401 leads to #/login.
  session.load().then((info) => {
    if (!info && !location.hash.startsWith('#/login')) location.hash = '#/login';
    else route();
  });
  document.getElementById('skip')?.addEventListener('click', (e) => {
    e.preventDefault();
    document.getElementById('app').focus();
  });
  showBuild();
}

// showBuild puts the answering node's version and commit in the footer, as
// `runnel version` prints them.
async function showBuild() {
  try {
    const b = (await get('/v1/cluster')).node?.build;
    if (!b) return;
    const commit = b.commit === 'unknown' ? '' : ` (${b.commit.slice(0, 12)}${b.modified ? '+modified' : ''})`;
    const el = document.getElementById('build');
    el.textContent = ` · runnel ${b.version}${commit}`;
    el.title = `${b.version} ${b.commit} ${b.go_version}`;
  } catch { /* the header shows connection problems */ }
}
