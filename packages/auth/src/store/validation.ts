/**
 * Field validation shared by store implementations: every store validates its input itself, so no caller
 * can write a malformed record. Each check throws `ValidationError` naming the field and the rule.
 */
import { ValidationError } from '../errors.ts';
import { normalizePermissionCodes } from '../permissions.ts';
import { GRANT_TYPES, type GrantType } from './types.ts';

// biome-ignore lint/suspicious/noControlCharactersInRegex: rejecting control characters is the point
const CONTROL = /[\u0000-\u001f\u007f]/;

/**
 * A required display string: trimmed, 1–`max` characters, no control characters.
 * @throws ValidationError (`required`, `max_length`, `characters`).
 */
export function requiredName(value: unknown, field: string, max: number): string {
  if (typeof value !== 'string' || value.trim().length === 0) {
    throw new ValidationError(field, 'required', `${field}: required (non-empty string)`);
  }
  const trimmed = value.trim();
  if (trimmed.length > max)
    throw new ValidationError(field, 'max_length', `${field}: at most ${max} characters`);
  if (CONTROL.test(trimmed))
    throw new ValidationError(field, 'characters', `${field}: control characters not allowed`);
  return trimmed;
}

/** An optional free text (default `''`), at most `max` characters. @throws ValidationError. */
export function optionalText(value: unknown, field: string, max = 1024): string {
  if (value === undefined || value === null) return '';
  if (typeof value !== 'string') throw new ValidationError(field, 'string', `${field}: must be a string`);
  if (value.length > max)
    throw new ValidationError(field, 'max_length', `${field}: at most ${max} characters`);
  return value;
}

/** A boolean (or `fallback` when undefined). @throws ValidationError. */
export function bool(value: unknown, field: string, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean')
    throw new ValidationError(field, 'boolean', `${field}: must be true or false`);
  return value;
}

/** Case-insensitive uniqueness key of a user or role name. */
export function nameKey(name: string): string {
  return name.normalize('NFKC').toLowerCase();
}

/** User name: 1–256 characters, no control characters. */
export function userName(value: unknown, field = 'userName'): string {
  return requiredName(value, field, 256);
}

const ROLE_NAME = /^[\p{L}\p{N}][\p{L}\p{N} _.-]{0,63}$/u;

/** Role name: 1–64 letters, digits, space, `_`, `-`, `.`, starting with a letter or digit. @throws ValidationError. */
export function roleName(value: unknown, field = 'name'): string {
  const name = requiredName(value, field, 64);
  if (!ROLE_NAME.test(name)) {
    throw new ValidationError(field, 'characters', `${field}: letters, digits, space, _, - and . only`);
  }
  return name;
}

const CLIENT_ID = /^[A-Za-z0-9._~-]{1,128}$/;

/** Client id: 1–128 characters of `A-Z a-z 0-9 . _ ~ -`. @throws ValidationError. */
export function clientId(value: unknown, field = 'clientId'): string {
  if (typeof value !== 'string' || value.length === 0) {
    throw new ValidationError(field, 'required', `${field}: required (non-empty string)`);
  }
  if (!CLIENT_ID.test(value)) {
    throw new ValidationError(field, 'characters', `${field}: 1–128 characters of A-Z a-z 0-9 . _ ~ -`);
  }
  return value;
}

function stringArray(value: unknown, field: string, maxItems: number): string[] {
  if (!Array.isArray(value))
    throw new ValidationError(field, 'array', `${field}: must be an array of strings`);
  if (value.length > maxItems)
    throw new ValidationError(field, 'max_items', `${field}: at most ${maxItems} items`);
  return value.map((item, i) => {
    if (typeof item !== 'string')
      throw new ValidationError(`${field}[${i}]`, 'string', `${field}[${i}]: must be a string`);
    return item;
  });
}

/** Permission pattern list (normalized, deduplicated, sorted), at most 1000 entries. @throws ValidationError. */
export function permissionList(value: unknown, field: string): string[] {
  if (value === undefined) return [];
  stringArray(value, field, 1000);
  return normalizePermissionCodes(value, field);
}

/** Role name list (deduplicated case-insensitively), at most 200 entries. @throws ValidationError. */
export function roleNameList(value: unknown, field = 'roles'): string[] {
  if (value === undefined) return [];
  const seen = new Map<string, string>();
  stringArray(value, field, 200).forEach((name, i) => {
    const valid = roleName(name, `${field}[${i}]`);
    seen.set(nameKey(valid), valid);
  });
  return [...seen.values()];
}

/** `AllowedGrantTypes`: each one of {@link GRANT_TYPES}. @throws ValidationError (`grant_type`). */
export function grantTypes(value: unknown, field = 'allowedGrantTypes'): GrantType[] {
  if (value === undefined) return [];
  const out = new Set<GrantType>();
  stringArray(value, field, 10).forEach((g, i) => {
    if (!(GRANT_TYPES as readonly string[]).includes(g)) {
      throw new ValidationError(
        `${field}[${i}]`,
        'grant_type',
        `${field}[${i}]: must be one of ${GRANT_TYPES.join(', ')}`,
      );
    }
    out.add(g as GrantType);
  });
  return [...out];
}

const SCOPE_TOKEN = /^[\x21\x23-\x5b\x5d-\x7e]{1,128}$/;

/** `AllowedScopes`: scope tokens per RFC 6749 §3.3 (no spaces, quotes or backslashes). @throws ValidationError. */
export function scopes(value: unknown, field = 'allowedScopes'): string[] {
  if (value === undefined) return [];
  const out = new Set<string>();
  stringArray(value, field, 200).forEach((s, i) => {
    if (!SCOPE_TOKEN.test(s))
      throw new ValidationError(
        `${field}[${i}]`,
        'scope_token',
        `${field}[${i}]: not a valid scope token (RFC 6749 §3.3)`,
      );
    out.add(s);
  });
  return [...out];
}

/** Redirect URIs: absolute http(s) (or private-scheme) URIs without fragment (RFC 6749 §3.1.2). @throws ValidationError. */
export function redirectUris(value: unknown, field = 'redirectUris'): string[] {
  if (value === undefined) return [];
  const out = new Set<string>();
  stringArray(value, field, 50).forEach((uri, i) => {
    let url: URL;
    try {
      url = new URL(uri);
    } catch {
      throw new ValidationError(`${field}[${i}]`, 'absolute_uri', `${field}[${i}]: must be an absolute URI`);
    }
    if (uri.length > 2048)
      throw new ValidationError(`${field}[${i}]`, 'max_length', `${field}[${i}]: at most 2048 characters`);
    if (url.hash || uri.includes('#')) {
      throw new ValidationError(
        `${field}[${i}]`,
        'no_fragment',
        `${field}[${i}]: must not contain a fragment (RFC 6749 §3.1.2)`,
      );
    }
    if (url.protocol === 'javascript:' || url.protocol === 'data:') {
      throw new ValidationError(`${field}[${i}]`, 'scheme', `${field}[${i}]: scheme not allowed`);
    }
    out.add(uri);
  });
  return [...out];
}

/**
 * An optional profile text (OIDC standard claim): undefined stays undefined (unchanged), null or a blank
 * string becomes null (cleared), otherwise trimmed, at most `max` characters, no control characters.
 * @throws ValidationError (`string`, `max_length`, `characters`).
 */
export function profileText(value: unknown, field: string, max = 256): string | null | undefined {
  if (value === undefined) return undefined;
  if (value === null) return null;
  if (typeof value !== 'string')
    throw new ValidationError(field, 'string', `${field}: must be a string or null`);
  const trimmed = value.trim();
  if (trimmed === '') return null;
  if (trimmed.length > max)
    throw new ValidationError(field, 'max_length', `${field}: at most ${max} characters`);
  if (CONTROL.test(trimmed))
    throw new ValidationError(field, 'characters', `${field}: control characters not allowed`);
  return trimmed;
}

const EMAIL = /^[^\s@"<>()\\,;:]+@[^\s@"<>()\\,;:]+\.[^\s@"<>()\\,;:.]+$/;

/**
 * An optional e-mail address: like {@link profileText}, and shaped `local@domain.tld` (no spaces, quotes or
 * angle brackets), at most 254 characters (RFC 5321 §4.5.3.1.3).
 * @throws ValidationError (`email`, `max_length`).
 */
export function email(value: unknown, field = 'email'): string | null | undefined {
  const text = profileText(value, field, 254);
  if (text === undefined || text === null) return text;
  if (!EMAIL.test(text))
    throw new ValidationError(field, 'email', `${field}: must be an e-mail address (local@domain)`);
  return text;
}

const E164 = /^\+[1-9]\d{1,14}(?:;ext=\d{1,10})?$/;

/**
 * An optional telephone number (OIDC Core §5.1 `phone_number`): E.164, `+` then 2–15 digits without
 * spaces (the first not 0), optionally `;ext=` and 1–10 digits (RFC 3966 extension). null or blank clears.
 * @throws ValidationError (`phoneNumber`, `e164`).
 */
export function phoneNumber(value: unknown, field = 'phoneNumber'): string | null | undefined {
  const text = profileText(value, field, 32);
  if (text === undefined || text === null) return text;
  if (!E164.test(text))
    throw new ValidationError(
      field,
      'e164',
      `${field}: must be an E.164 number, + and country code and digits without spaces (e.g. +4930123456)`,
    );
  return text;
}

/** The members of an address (OIDC Core §5.1.1), in claim order; the multi-line ones marked. */
const ADDRESS_MEMBERS = [
  ['formatted', true],
  ['streetAddress', true],
  ['locality', false],
  ['region', false],
  ['postalCode', false],
  ['country', false],
] as const;

// biome-ignore lint/suspicious/noControlCharactersInRegex: rejecting control characters is the point
const CONTROL_BUT_NEWLINE = /[\u0000-\u0009\u000b-\u001f\u007f]/;

/**
 * An optional postal address (OIDC Core §5.1.1): an object of {@link ADDRESS_MEMBERS} strings, each at most
 * 256 characters; `formatted` and `streetAddress` may hold newlines (`\r\n` is stored as `\n`), the others
 * no control characters; blank members are dropped, an address without members is null.
 * @throws ValidationError (`address`: `object`, `unknown_member`; `address.<member>`: `string`,
 *   `max_length`, `characters`).
 */
export function address(value: unknown, field = 'address'): Record<string, string> | null | undefined {
  if (value === undefined) return undefined;
  if (value === null) return null;
  if (typeof value !== 'object' || Array.isArray(value))
    throw new ValidationError(field, 'object', `${field}: must be an object or null`);
  const known = new Set<string>(ADDRESS_MEMBERS.map(([name]) => name));
  for (const key of Object.keys(value)) {
    if (!known.has(key))
      throw new ValidationError(
        field,
        'unknown_member',
        `${field}: unknown member '${key.slice(0, 64)}' (allowed: ${[...known].join(', ')})`,
      );
  }
  const result: Record<string, string> = {};
  for (const [name, multiLine] of ADDRESS_MEMBERS) {
    const member = `${field}.${name}`;
    const raw = (value as Record<string, unknown>)[name];
    if (raw === undefined || raw === null) continue;
    if (typeof raw !== 'string') throw new ValidationError(member, 'string', `${member}: must be a string`);
    const text = raw.replace(/\r\n/g, '\n').trim();
    if (text === '') continue;
    if (text.length > 256)
      throw new ValidationError(member, 'max_length', `${member}: at most 256 characters`);
    if ((multiLine ? CONTROL_BUT_NEWLINE : CONTROL).test(text))
      throw new ValidationError(member, 'characters', `${member}: control characters not allowed`);
    result[name] = text;
  }
  return Object.keys(result).length === 0 ? null : result;
}

/**
 * An optional absolute `http`/`https` URI without fragment (e.g. a back-channel logout URI), at most 2048
 * characters; null or `''` clears it.
 * @throws ValidationError (`absolute_uri`, `scheme`, `no_fragment`, `max_length`).
 */
export function httpUri(value: unknown, field: string): string | null {
  if (value === null || value === '') return null;
  if (typeof value !== 'string')
    throw new ValidationError(field, 'string', `${field}: must be a string or null`);
  if (value.length > 2048)
    throw new ValidationError(field, 'max_length', `${field}: at most 2048 characters`);
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ValidationError(field, 'absolute_uri', `${field}: must be an absolute URI`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    throw new ValidationError(field, 'scheme', `${field}: must use http or https`);
  if (url.hash || value.includes('#'))
    throw new ValidationError(field, 'no_fragment', `${field}: must not contain a fragment`);
  return value;
}
