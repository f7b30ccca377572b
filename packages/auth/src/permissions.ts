/**
 * Permission codes and their compiled matchers (spec 001 permission evaluation).
 *
 * Syntax: a code is dot-separated segments, e.g. `auth.admin.users`. A segment is 1–64 characters of
 * `a-z`, `0-9`, `_`, `-`, starting with a letter or digit; codes are case-insensitive and normalized to
 * lower case with surrounding whitespace removed; at most 32 segments and 256 characters.
 * Grant and deny rules are patterns: `*` matches exactly one segment, `**` (last segment only) matches one
 * or more remaining segments, so `auth.admin.**` matches `auth.admin.users` and `auth.admin.users.read`
 * but not `auth.admin` itself. A code an endpoint requires must be concrete (no wildcards).
 */
import { ValidationError } from './errors.ts';

/** Maximum length of a permission code, in characters. */
export const MAX_PERMISSION_CODE_LENGTH = 256;
/** Maximum number of dot-separated segments in a permission code. */
export const MAX_PERMISSION_SEGMENTS = 32;

const SEGMENT = /^[a-z0-9][a-z0-9_-]{0,63}$/;

/** Options of {@link tryNormalizePermissionCode}. */
export interface NormalizeOptions {
  /** Accept `*` and a trailing `**` (grant/deny patterns). Default true. */
  allowWildcards?: boolean;
}

/**
 * Normalizes a permission code or pattern (trim, lower case) and checks its syntax.
 * @returns the normalized code, or `undefined` when it cannot be normalized.
 */
export function tryNormalizePermissionCode(
  code: unknown,
  options: NormalizeOptions = {},
): string | undefined {
  if (typeof code !== 'string') return undefined;
  const normalized = code.trim().toLowerCase();
  if (normalized.length === 0 || normalized.length > MAX_PERMISSION_CODE_LENGTH) return undefined;
  const segments = normalized.split('.');
  if (segments.length > MAX_PERMISSION_SEGMENTS) return undefined;
  const wildcards = options.allowWildcards ?? true;
  for (let i = 0; i < segments.length; i++) {
    const segment = segments[i]!;
    if (segment === '*' && wildcards) continue;
    if (segment === '**' && wildcards && i === segments.length - 1) continue;
    if (!SEGMENT.test(segment)) return undefined;
  }
  return normalized;
}

/**
 * Like {@link tryNormalizePermissionCode} but throws.
 * @param field name of the input field, used in the error (e.g. `'permissions[2]'`).
 * @throws ValidationError (`rule: 'permission_code'`) when the code cannot be normalized.
 */
export function normalizePermissionCode(
  code: unknown,
  field = 'code',
  options: NormalizeOptions = {},
): string {
  const normalized = tryNormalizePermissionCode(code, options);
  if (normalized === undefined) {
    throw new ValidationError(
      field,
      'permission_code',
      `${field}: '${String(code).slice(0, 80)}' is not a valid permission code (dot-separated segments of a-z, 0-9, _ and -${options.allowWildcards === false ? '' : '; * for one segment, trailing ** for the rest'})`,
    );
  }
  return normalized;
}

/**
 * Normalizes a list of permission patterns: each normalized, duplicates removed, sorted.
 * @param field name of the list field; errors name the element, e.g. `deniedPermissions[1]`.
 * @throws ValidationError when the value is not an array of valid codes.
 */
export function normalizePermissionCodes(codes: unknown, field: string): string[] {
  if (!Array.isArray(codes))
    throw new ValidationError(field, 'array', `${field}: must be an array of permission codes`);
  const out = new Set<string>();
  codes.forEach((code, i) => {
    out.add(normalizePermissionCode(code, `${field}[${i}]`));
  });
  return [...out].sort();
}

/** Result of matching a code against a subject's rules: deny wins over allow. */
export type PermissionEffect = 'allow' | 'deny' | 'none';

interface TrieNode {
  exact: Map<string, TrieNode> | undefined;
  star: TrieNode | undefined;
  /** a `**` ends here: matches one or more further segments */
  rest: boolean;
  /** a pattern ends exactly here */
  end: boolean;
}

function node(): TrieNode {
  return { exact: undefined, star: undefined, rest: false, end: false };
}

function insert(root: TrieNode, pattern: string): void {
  let current = root;
  for (const segment of pattern.split('.')) {
    if (segment === '**') {
      current.rest = true;
      return;
    }
    if (segment === '*') {
      current.star ??= node();
      current = current.star;
    } else {
      current.exact ??= new Map();
      let next = current.exact.get(segment);
      if (!next) {
        next = node();
        current.exact.set(segment, next);
      }
      current = next;
    }
  }
  current.end = true;
}

function matches(current: TrieNode, segments: readonly string[], i: number): boolean {
  if (i === segments.length) return current.end;
  if (current.rest) return true;
  const exact = current.exact?.get(segments[i]!);
  if (exact && matches(exact, segments, i + 1)) return true;
  return current.star !== undefined && matches(current.star, segments, i + 1);
}

/** Largest number of distinct codes whose result one {@link PermissionMatcher} memoizes. */
export const MATCHER_MEMO_SIZE = 512;

/**
 * A subject's grant and deny patterns compiled into two tries, with a bounded memo of results per
 * requested code. Immutable once built; build a new one when the rules change.
 */
export class PermissionMatcher {
  readonly #allow = node();
  readonly #deny = node();
  readonly #memo: Map<string, PermissionEffect> | undefined;

  /**
   * @param allow grant patterns (already normalized; invalid entries are ignored).
   * @param deny deny patterns (already normalized; invalid entries are ignored).
   * @param memo memoize results per code (default true).
   */
  constructor(allow: Iterable<string>, deny: Iterable<string>, memo = true) {
    for (const code of allow) if (tryNormalizePermissionCode(code) === code) insert(this.#allow, code);
    for (const code of deny) if (tryNormalizePermissionCode(code) === code) insert(this.#deny, code);
    this.#memo = memo ? new Map() : undefined;
  }

  /**
   * Evaluates a normalized concrete code: `'deny'` if any deny pattern matches (deny wins), else
   * `'allow'` if a grant pattern matches, else `'none'`.
   */
  evaluate(code: string): PermissionEffect {
    const memo = this.#memo;
    if (memo) {
      const hit = memo.get(code);
      if (hit !== undefined) return hit;
    }
    const segments = code.split('.');
    const effect: PermissionEffect = matches(this.#deny, segments, 0)
      ? 'deny'
      : matches(this.#allow, segments, 0)
        ? 'allow'
        : 'none';
    if (memo) {
      if (memo.size >= MATCHER_MEMO_SIZE) memo.clear();
      memo.set(code, effect);
    }
    return effect;
  }
}

/** Rules that make up one subject's permissions (already normalized patterns). */
export interface PermissionRules {
  readonly allow: readonly string[];
  readonly deny: readonly string[];
}

/**
 * Cache of compiled matchers per subject. An entry is reused while its `version` string is unchanged;
 * callers build the version from the subject's security stamp, its record version and its roles' versions
 * (see {@link subjectVersion}), so any change to the subject or its roles recompiles on next use.
 */
export class MatcherCache {
  readonly #entries = new Map<string, { version: string; matcher: PermissionMatcher }>();
  readonly #max: number;
  readonly #memo: boolean;

  /**
   * @param maxEntries subjects kept (oldest evicted first); default 10 000.
   * @param memo memoize per-code results inside each matcher (default true).
   */
  constructor(maxEntries = 10_000, memo = true) {
    this.#max = maxEntries;
    this.#memo = memo;
  }

  /** The cached matcher of `subjectKey` if its version equals `version`, else a freshly compiled one. */
  get(subjectKey: string, version: string, rules: () => PermissionRules): PermissionMatcher {
    const entry = this.#entries.get(subjectKey);
    if (entry && entry.version === version) return entry.matcher;
    const { allow, deny } = rules();
    const matcher = new PermissionMatcher(allow, deny, this.#memo);
    if (entry) this.#entries.delete(subjectKey);
    else if (this.#entries.size >= this.#max) {
      const oldest = this.#entries.keys().next();
      if (!oldest.done) this.#entries.delete(oldest.value);
    }
    this.#entries.set(subjectKey, { version, matcher });
    return matcher;
  }

  /** Drops one subject's matcher (or all when no key is given). */
  invalidate(subjectKey?: string): void {
    if (subjectKey === undefined) this.#entries.clear();
    else this.#entries.delete(subjectKey);
  }

  /** Number of cached subjects. */
  get size(): number {
    return this.#entries.size;
  }
}
