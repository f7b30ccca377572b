/**
 * What an envd request knows once routed (`router.ts`): its sandbox, the box, and the OS user it acts as
 * (`Authorization: Basic <user>:` or the `username` query parameter, default `user`), handed to the
 * Connect services as a context value.
 */
import { createContextKey } from '@connectrpc/connect';
import { BoxError } from '../errors.ts';
import type { JsBox } from '../runtime/box.ts';
import { DEFAULT_USER, type E2bSandbox } from './sandboxes.ts';

/** One routed envd request. */
export interface EnvdRequest {
  record: E2bSandbox;
  box: JsBox;
  /** The OS user in the box. */
  user: string;
  /**
   * Admits one command of the sandbox's tenant (its exec rate and running-executions quota,
   * `ServerContext.admitExecution`); the returned function gives the slot back once the command has ended.
   * @throws BoxError `quota_exceeded` naming the quota.
   */
  admit: () => Promise<() => void>;
}

/** The Connect context key of {@link EnvdRequest}. */
export const envdKey = createContextKey<EnvdRequest | null>(null, { description: 'the routed E2B sandbox' });

const USER_RE = /^[a-z_][a-z0-9_-]{0,31}$/;

/**
 * The user named by `Authorization: Basic base64(<user>:)` or by `query` (query wins), else `user`.
 * @throws BoxError `invalid_option` (field `username`) for a name that is not a POSIX user name.
 */
export function userOf(authorization: string | undefined, query: string | null): string {
  let user: string | undefined = query ?? undefined;
  if (!user && authorization?.startsWith('Basic ')) {
    const decoded = Buffer.from(authorization.slice(6), 'base64').toString('utf8');
    const name = decoded.split(':')[0];
    if (name) user = name;
  }
  if (user === undefined || user === '') return DEFAULT_USER;
  if (!USER_RE.test(user)) {
    throw new BoxError(`invalid username '${user.slice(0, 40)}': must be a POSIX user name`, {
      field: 'username',
      code: 'invalid_option',
    });
  }
  return user;
}

/** The home directory of `user` in E2B templates: `/root` for root, else `/home/<user>`. */
export function homeOf(user: string): string {
  return user === 'root' ? '/root' : `/home/${user}`;
}

/** `path` made absolute against the user's home (E2B resolves relative paths there). */
export function resolvePath(path: string, user: string): string {
  if (path.startsWith('/')) return path;
  const home = homeOf(user);
  if (path === '' || path === '.') return home;
  if (path === '~') return home;
  if (path.startsWith('~/')) return `${home}/${path.slice(2)}`;
  return `${home}/${path}`;
}
