/**
 * Admin page of the auth service (spec 001 "Administration web page"): built by `scripts/build-admin-web.ts`
 * (Vite) into `dist/`, which `src/admin/page.ts` serves. Signs in through the server's own authorization-code
 * + PKCE flow (`oauth.ts`), then calls `{BasePath}/api` through the typed client (`api.ts`). All record data
 * is written as text, never as HTML: names come from other administrators.
 */
import { call, client, onSessionEnded } from './api.ts';
import { auditView } from './audit.ts';
import { clientsView } from './clients.ts';
import { byId, status } from './dom.ts';
import { handleCallback, signIn, signOut, subjectOf, tokens } from './oauth.ts';
import { permissionsView } from './permissions.ts';
import { rolesView } from './roles.ts';
import { isViewName, setViews, show } from './shell.ts';
import { usersView } from './users.ts';

setViews({
  users: usersView,
  roles: rolesView,
  clients: clientsView,
  permissions: permissionsView,
  audit: auditView,
});

/** Shows the signed-in or the signed-out page, with the administrator's name and the current view. */
async function render(): Promise<void> {
  const current = tokens();
  byId('signed-out').hidden = Boolean(current);
  byId('signed-in').hidden = !current;
  byId('sign-out').hidden = !current;
  byId('who-box').hidden = !current;
  byId('who').textContent = '';
  if (!current) return;
  const sub = subjectOf(current.accessToken);
  byId('who').textContent = sub ?? '';
  call(client.GET('/users/{id}', { params: { path: { id: String(sub) } } }))
    .then((user) => {
      byId('who').textContent = user.userName;
    })
    .catch(() => undefined);
  await show();
}

onSessionEnded(() => {
  render();
});
byId('sign-in').addEventListener('click', () =>
  signIn().catch((error: Error) => status(error.message, 'error')),
);
byId('sign-out').addEventListener('click', () => {
  signOut();
});
for (const button of document.querySelectorAll<HTMLButtonElement>('nav button')) {
  button.addEventListener('click', () => {
    status('');
    if (isViewName(button.dataset.view)) show(button.dataset.view);
  });
}
await handleCallback();
await render();
