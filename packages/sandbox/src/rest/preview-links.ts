/**
 * The URLs of signed preview links (`tenancy/previews.ts` keeps the previews): path form
 * `<publicUrl>/preview/<token>/`, or with a preview domain `<scheme>://<port>-<boxId>.<domain>/?preview_token=<token>`.
 */
import type { PreviewInfo } from './tenancy/previews.ts';

/** A signed preview URL (see `ServerContext.previewUrl`). */
export interface PreviewUrl {
  /** The URL, token included; works without an API key until `expiresAt` or revocation. */
  url: string;
  /** The bearer token of the URL (`pv_…`), shown once. */
  token: string;
  /** When it stops working, RFC 3339. */
  expiresAt: string;
  /** Id of the preview (to revoke it). */
  id: string;
}

/**
 * The URL of preview `info` carrying `token`: under `publicUrl` (default `http://127.0.0.1`), Host-routed
 * under `previewDomain` (with the scheme of `publicUrl`) when one is set.
 */
export function previewLink(
  publicUrl: string | null,
  previewDomain: string | null,
  info: PreviewInfo,
  token: string,
): string {
  const base = publicUrl ?? 'http://127.0.0.1';
  if (previewDomain) {
    const scheme = new URL(base).protocol;
    return `${scheme}//${info.port}-${info.boxId.toLowerCase()}.${previewDomain}/?preview_token=${token}`;
  }
  return `${base}/preview/${token}/`;
}
