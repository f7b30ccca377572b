/**
 * `application/x-www-form-urlencoded` request bodies for the OAuth endpoints (RFC 6749 §3.2, §4.1.3,
 * Appendix B) and HTTP Basic client credentials (RFC 6749 §2.3.1).
 */
import type { FastifyInstance } from 'fastify';
import { parseAuthorization } from '../authorization-header.ts';
import { OAuthError } from './errors.ts';

/** Marker body for a request whose content type is not `application/x-www-form-urlencoded`. */
export const NOT_FORM: unique symbol = Symbol('not-form-urlencoded');

/** Largest accepted form body, in bytes (OAuth requests are small; bigger bodies get 413). */
export const MAX_FORM_BYTES = 16 * 1024;

/**
 * Registers, on an encapsulated Fastify context, a parser that turns form bodies into `URLSearchParams`
 * and every other content type into {@link NOT_FORM} (so the route answers `invalid_request` instead of
 * Fastify's generic 415).
 */
export function registerFormParser(app: FastifyInstance): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser(
    'application/x-www-form-urlencoded',
    { parseAs: 'string', bodyLimit: MAX_FORM_BYTES },
    (_req, body, done) => done(null, new URLSearchParams(body as string)),
  );
  app.addContentTypeParser('*', { bodyLimit: MAX_FORM_BYTES }, (_req, payload, done) => {
    // Drain the stream so the connection can be reused, then mark the body as the wrong type.
    payload.on('data', () => {});
    payload.on('end', () => done(null, NOT_FORM));
    payload.on('error', (err) => done(err, undefined));
  });
}

/** Read access to the parameters of one form body. */
export interface FormParams {
  /** The parameter's value, `undefined` when absent or empty (RFC 6749 §3.1: empty = omitted). */
  get(name: string): string | undefined;
  /** Every value of a parameter that may repeat ({@link REPEATABLE_PARAMS}), empty values included. */
  getAll(name: string): string[];
}

/**
 * A parameter the request must carry (RFC 6749 §5.2 `invalid_request` when it is missing).
 * @throws OAuthError `invalid_request` "<name> is required".
 */
export function requiredParam(form: FormParams, name: string): string {
  const value = form.get(name);
  if (value === undefined) throw new OAuthError('invalid_request', `${name} is required`);
  return value;
}

/** Parameters that may appear more than once: `resource` (RFC 8707 §2). */
export const REPEATABLE_PARAMS: ReadonlySet<string> = new Set(['resource']);

/**
 * Validates a parsed body: it must be a form body, and no parameter may appear twice
 * (RFC 6749 §3.2: "Request and response parameters MUST NOT be included more than once").
 * @throws OAuthError `invalid_request` naming the rule broken.
 */
export function requireForm(body: unknown): FormParams {
  if (!(body instanceof URLSearchParams)) {
    throw new OAuthError('invalid_request', 'request body must be application/x-www-form-urlencoded');
  }
  const seen = new Set<string>();
  for (const key of body.keys()) {
    if (seen.has(key) && !REPEATABLE_PARAMS.has(key))
      throw new OAuthError('invalid_request', `parameter '${key}' must not be repeated`);
    seen.add(key);
  }
  return {
    get(name) {
      const value = body.get(name);
      return value === null || value === '' ? undefined : value;
    },
    getAll(name) {
      return body.getAll(name);
    },
  };
}

/** Client credentials taken from an `Authorization: Basic` header. */
export interface BasicCredentials {
  readonly clientId: string;
  readonly clientSecret: string;
}

/**
 * Parses `Authorization: Basic base64(urlencode(client_id) ":" urlencode(client_secret))`
 * (RFC 6749 §2.3.1, RFC 7617). Returns `undefined` when the header is absent or uses another scheme.
 * @throws OAuthError `invalid_request` when the header is a malformed Basic header (spec 001 table).
 */
export function parseBasicAuth(header: string | undefined): BasicCredentials | undefined {
  const parsed = parseAuthorization(header);
  if (parsed.kind === 'malformed' && parsed.scheme === 'Basic') {
    throw new OAuthError(
      'invalid_request',
      parsed.problem === 'no-colon'
        ? "malformed Basic authorization header: expected 'client_id:client_secret'"
        : 'malformed Basic authorization header: not base64',
    );
  }
  if (parsed.kind !== 'basic') return undefined;
  if (parsed.userId === '') {
    throw new OAuthError(
      'invalid_request',
      "malformed Basic authorization header: expected 'client_id:client_secret'",
    );
  }
  try {
    return {
      clientId: decodeFormComponent(parsed.userId),
      clientSecret: decodeFormComponent(parsed.password),
    };
  } catch {
    throw new OAuthError('invalid_request', 'malformed Basic authorization header: bad percent-encoding');
  }
}

function decodeFormComponent(value: string): string {
  return decodeURIComponent(value.replace(/\+/g, ' '));
}
