/**
 * Whether two factors are required for a role or a client (`{BasePath}/api/{roles|clients}/{id}/mfa-required`),
 * with a button that switches it.
 */
import { call, client } from './api.ts';
import { button, el } from './dom.ts';
import { act } from './shell.ts';

/** The target of a requirement: a role (by id) or a client (by client id). */
export type MfaTarget = { kind: 'role'; id: string } | { kind: 'client'; id: string };

function setRequired(target: MfaTarget, required: boolean): Promise<unknown> {
  if (target.kind === 'role') {
    const options = { params: { path: { id: target.id } } };
    return call(
      required
        ? client.PUT('/roles/{id}/mfa-required', options)
        : client.DELETE('/roles/{id}/mfa-required', options),
    );
  }
  const options = { params: { path: { clientId: target.id } } };
  return call(
    required
      ? client.PUT('/clients/{clientId}/mfa-required', options)
      : client.DELETE('/clients/{clientId}/mfa-required', options),
  );
}

/** A card telling whether two factors are required for `target` (shown as `label`); filled when loaded. */
export function mfaRequirement(target: MfaTarget, label: string): HTMLElement {
  const box = el('section', { class: 'card', 'aria-label': `Two factors for ${label}` });
  call(client.GET('/mfa-requirements'))
    .then((page) => {
      const required = page.items.some((r) => r.targetKind === target.kind && r.targetId === target.id);
      box.append(
        el('p', {
          text: required
            ? `Two factors are required for ${label}.`
            : `Two factors are not required for ${label}.`,
        }),
        button(required ? 'Stop requiring two factors' : 'Require two factors', () =>
          act(
            required ? `Two factors no longer required for ${label}.` : `Two factors required for ${label}.`,
            () => setRequired(target, !required),
          ),
        ),
      );
    })
    .catch((error: Error) => box.append(el('p', { class: 'error', text: error.message })));
  return box;
}
