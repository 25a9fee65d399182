// #/login: a user's name and password, or an API token. The session cookie
// is HttpOnly; the page keeps only the CSRF token (session.js).
import { h, replace, errorBox } from '../dom.js';
import * as session from '../session.js';

export async function render(root) {
  const user = h('input', { id: 'login-user', name: 'user', autocomplete: 'username' });
  const password = h('input', { id: 'login-password', name: 'password', type: 'password', autocomplete: 'current-password' });
  const token = h('input', { id: 'login-token', name: 'token', type: 'password', autocomplete: 'off' });
  const msg = h('div');
  const form = h('form', { class: 'card', 'data-test': 'login-form', onSubmit: async (e) => {
    e.preventDefault();
    try {
      await session.login(token.value ? { token: token.value } : { user: user.value, password: password.value });
      location.hash = '#/cluster';
    } catch (err) {
      replace(msg, errorBox(err));
    }
  } },
  h('label', { for: 'login-user' }, 'User'), user,
  h('label', { for: 'login-password' }, 'Password'), password,
  h('p', { class: 'muted' }, 'or an API token (runnel token create)'),
  h('label', { for: 'login-token' }, 'Token'), token,
  h('button', { type: 'submit', 'data-test': 'login-submit' }, 'Log in'),
  msg);
  replace(root, h('h1', null, 'Log in'), form);
  user.focus();
}
