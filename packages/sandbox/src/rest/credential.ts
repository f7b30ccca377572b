/**
 * Credentials and options of a REST runtime in BoxLite's shape (`ApiKeyCredential`, `BoxliteRestOptions`
 * renamed `RuntimeRestOptions` by spec 002's naming rule), for `JsRuntime.rest(options)`.
 */
import { BoxError } from '../errors.ts';

/** A bearer token and its expiry (null: never expires). */
export interface AccessToken {
  token: string;
  expiresAt?: Date | null;
}

/** Anything that produces a bearer token for the REST runtime (structural: no `implements` needed). */
export interface Credential {
  getToken(): AccessToken;
}

/** A long-lived API key of the REST runtime server (`sandbox serve --api-key`). */
export class ApiKeyCredential implements Credential {
  readonly #key: string;

  /** @throws BoxError `invalid_option` (field `apiKey`) when `key` is not a non-empty string. */
  constructor(key: string) {
    if (typeof key !== 'string' || key === '') {
      throw new BoxError('invalid credential apiKey: must be a non-empty string', { field: 'apiKey' });
    }
    this.#key = key;
  }

  /** The key as a token that never expires. */
  getToken(): AccessToken {
    return { token: this.#key, expiresAt: null };
  }

  /** A credential from `SANDBOX_API_KEY`, or null when it is unset or empty. */
  static fromEnv(env: NodeJS.ProcessEnv = process.env): ApiKeyCredential | null {
    const key = env.SANDBOX_API_KEY;
    return key ? new ApiKeyCredential(key) : null;
  }
}

/** Where a REST runtime is (BoxLite `BoxliteRestOptions`). */
export class RuntimeRestOptions {
  /** Base URL of the server, e.g. `http://127.0.0.1:8100`. */
  readonly url: string;
  /** Credential sent as `Authorization: Bearer`; none for a loopback server without a key. */
  readonly credential?: Credential;
  /** API version prefix; only `v1` (the server's) is accepted. */
  readonly prefix?: string;

  /**
   * @throws BoxError `invalid_option` naming `url` (not an http(s) URL), `credential` (no `getToken`) or
   *   `prefix` (other than `v1`).
   */
  constructor(options: { url: string; credential?: Credential; prefix?: string }) {
    if (options === null || typeof options !== 'object') {
      throw new BoxError('REST options must be an object', { field: 'options' });
    }
    if (typeof options.url !== 'string' || !/^https?:\/\/[^\s/]+/.test(options.url)) {
      throw new BoxError('invalid REST option url: must be an http(s) URL such as http://127.0.0.1:8100', {
        field: 'url',
      });
    }
    if (options.credential !== undefined && typeof options.credential?.getToken !== 'function') {
      throw new BoxError('invalid REST option credential: must have getToken()', { field: 'credential' });
    }
    if (options.prefix !== undefined && options.prefix !== 'v1') {
      throw new BoxError("invalid REST option prefix: this server speaks only 'v1'", { field: 'prefix' });
    }
    this.url = options.url;
    if (options.credential !== undefined) this.credential = options.credential;
    if (options.prefix !== undefined) this.prefix = options.prefix;
  }
}
