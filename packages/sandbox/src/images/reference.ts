/**
 * Image references: parsing and normalization per the distribution reference grammar
 * (github.com/distribution/reference, as used by Docker and the OCI Distribution Spec §2 "Definitions"),
 * and resolution of unqualified names through the `search` registries of `JsOptions.imageRegistries`.
 */
import { BoxError } from '../errors.ts';
import type { JsImageRegistry } from '../types.ts';

/** Registry used for unqualified names after the search registries (Docker Hub). */
export const DEFAULT_REGISTRY = 'docker.io';

const COMPONENT = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/;
const TAG = /^[\w][\w.-]{0,127}$/;
const DIGEST = /^[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[a-zA-Z0-9=_-]{32,}$/;
const DOMAIN =
  /^(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*|\[[0-9a-fA-F:.]+\])(?::[0-9]+)?$/;

/** A parsed reference. `domain` is absent when the user wrote an unqualified name like `python:slim`. */
export interface ParsedReference {
  domain?: string;
  /** Repository path as written, e.g. `python` or `library/python`. */
  path: string;
  tag?: string;
  /** `algorithm:hex` when pinned by digest. */
  digest?: string;
}

/** A fully qualified reference ready to pull: `domain/repository[:tag][@digest]`. */
export interface QualifiedReference {
  /** Registry host as configured (`docker.io` for Docker Hub), with port if any. */
  domain: string;
  repository: string;
  /** Tag; `latest` when neither tag nor digest was given. */
  tag?: string;
  digest?: string;
}

/**
 * Parses an image reference. Throws `BoxError` naming the reference and the rule broken
 * (empty, upper-case repository, bad tag, bad digest).
 */
export function parseReference(reference: string): ParsedReference {
  const bad = (rule: string) =>
    new BoxError(`invalid image reference '${reference}': ${rule}`, { code: 'invalid_option' });
  if (typeof reference !== 'string' || reference.length === 0) throw bad('must be a non-empty string');
  if (reference.length > 4096) throw bad('longer than 4096 characters');
  let rest = reference;
  let digest: string | undefined;
  const at = rest.indexOf('@');
  if (at >= 0) {
    digest = rest.slice(at + 1);
    rest = rest.slice(0, at);
    if (!DIGEST.test(digest)) throw bad(`digest '${digest}' is not algorithm:hex`);
  }
  let tag: string | undefined;
  const lastSlash = rest.lastIndexOf('/');
  const colon = rest.lastIndexOf(':');
  if (colon > lastSlash) {
    tag = rest.slice(colon + 1);
    rest = rest.slice(0, colon);
    if (!TAG.test(tag)) throw bad(`tag '${tag}' must match [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}`);
  }
  const parts = rest.split('/');
  let domain: string | undefined;
  if (parts.length > 1) {
    const first = parts[0]!;
    if (
      first.includes('.') ||
      first.includes(':') ||
      first === 'localhost' ||
      first !== first.toLowerCase()
    ) {
      if (!DOMAIN.test(first)) throw bad(`registry host '${first}' is not a valid host[:port]`);
      domain = first;
      parts.shift();
    }
  }
  for (const c of parts) {
    if (!COMPONENT.test(c)) {
      throw bad(`repository component '${c}' must be lower-case letters, digits and single separators (._-)`);
    }
  }
  const path = parts.join('/');
  if (path.length === 0) throw bad('repository name is empty');
  return { domain, path, tag, digest };
}

/** The repository path on a registry: single-component names get `library/` (Docker Hub convention). */
function repositoryOn(path: string): string {
  return path.includes('/') ? path : `library/${path}`;
}

/** Formats a qualified reference as `domain/repository:tag` or `domain/repository@digest`. */
export function formatReference(ref: QualifiedReference): string {
  return `${ref.domain}/${ref.repository}${ref.tag ? `:${ref.tag}` : ''}${ref.digest ? `@${ref.digest}` : ''}`;
}

/**
 * The fully qualified candidates of a reference, in the order they are tried: the reference itself when it
 * names a registry; otherwise each `search: true` registry in list order, then Docker Hub.
 * Tag defaults to `latest` when there is neither a tag nor a digest.
 */
export function candidates(reference: string, registries: JsImageRegistry[] = []): QualifiedReference[] {
  const p = parseReference(reference);
  const tag = p.tag ?? (p.digest ? undefined : 'latest');
  if (p.domain) {
    const domain = p.domain === 'index.docker.io' ? DEFAULT_REGISTRY : p.domain;
    const repository = domain === DEFAULT_REGISTRY ? repositoryOn(p.path) : p.path;
    return [{ domain, repository, tag, digest: p.digest }];
  }
  const out: QualifiedReference[] = [];
  for (const r of registries) {
    if (r.search) out.push({ domain: r.host, repository: repositoryOn(p.path), tag, digest: p.digest });
  }
  out.push({ domain: DEFAULT_REGISTRY, repository: repositoryOn(p.path), tag, digest: p.digest });
  return out;
}

/** Connection settings of one registry host: base URL of the API, TLS and credentials. */
export interface RegistryEndpoint {
  /** e.g. `http://127.0.0.1:5000`. */
  baseUrl: string;
  skipVerify: boolean;
  auth?: JsImageRegistry['auth'];
}

/**
 * Finds how to talk to `domain`: the matching `imageRegistries` entry (transport, TLS, auth), else https,
 * except loopback hosts (`localhost`, `127.*`, `[::1]`) which default to http like Docker's insecure list.
 */
export function endpointFor(domain: string, registries: JsImageRegistry[] = []): RegistryEndpoint {
  const conf = registries.find((r) => r.host === domain);
  const hostOnly = domain.replace(/:\d+$/, '');
  const loopback = hostOnly === 'localhost' || hostOnly.startsWith('127.') || hostOnly === '[::1]';
  const transport = conf?.transport ?? (loopback ? 'http' : 'https');
  if (transport !== 'http' && transport !== 'https') {
    throw new BoxError(`imageRegistries: transport of '${domain}' must be 'http' or 'https'`, {
      field: 'imageRegistries',
      code: 'invalid_option',
    });
  }
  const apiHost = domain === DEFAULT_REGISTRY ? 'registry-1.docker.io' : domain;
  return { baseUrl: `${transport}://${apiHost}`, skipVerify: conf?.skipVerify === true, auth: conf?.auth };
}
