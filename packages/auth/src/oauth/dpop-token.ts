/**
 * DPoP at the token endpoint (RFC 9449 §5): the proof of a token request, the per-client "DPoP required"
 * rule (`dpop_bound_access_tokens`, §5.2), the store-backed replay cache shared by server instances, and
 * the `DPoP-Nonce` header (§8).
 */
import type { FastifyRequest } from 'fastify';
import type { AuthStore, ClientRecord } from '../store/types.ts';
import type { OAuthConfig } from './config.ts';
import type { OAuthContext } from './context.ts';
import { DpopNonces, type DpopProof, DpopProofError, DpopProofVerifier, type ReplayCache } from './dpop.ts';
import { OAuthError } from './errors.ts';

/** A {@link ReplayCache} over the store's `replay_cache` table (shared by every instance using the store). */
export function storeReplayCache(store: AuthStore, now: () => number): ReplayCache {
  return { claim: (kind, key, expiresAt) => store.claimReplayKey(kind, key, expiresAt, now()) };
}

/**
 * The DPoP verifier configured by `config.dpop` (RFC 9449 §4.3, §8), or undefined when DPoP is off.
 * @throws RangeError for a nonce secret shorter than 16 bytes.
 */
export function createDpopVerifier(
  config: OAuthConfig,
  store: AuthStore,
  now: () => number,
): DpopProofVerifier | undefined {
  const settings = config.dpop;
  if (!settings) return undefined;
  return new DpopProofVerifier({
    replay: storeReplayCache(store, now),
    nonces: new DpopNonces({ secret: settings.nonceSecret, now }),
    requireNonce: settings.requireNonce,
    maxAgeSeconds: settings.proofMaxAgeSeconds,
    clockSkewSeconds: settings.clockSkewSeconds,
    now,
  });
}

/** Maps a refused proof to the token endpoint's error (`DPoP-Nonce` header with `use_dpop_nonce`). */
export function dpopOAuthError(error: DpopProofError): OAuthError {
  return new OAuthError(error.dpopError, error.message, error.nonce ? { 'dpop-nonce': error.nonce } : {});
}

/**
 * Verifies the DPoP proof of a token request (`htm` POST, `htu` the advertised token endpoint URL).
 * @returns the proof, or undefined when the request carries none (or DPoP is off) and the client does not
 * require DPoP.
 * @throws OAuthError `invalid_dpop_proof` (bad proof, or none from a client with
 * `dpopBoundAccessTokens`), `use_dpop_nonce` (with the `DPoP-Nonce` header).
 */
export async function tokenRequestProof(
  req: FastifyRequest,
  ctx: OAuthContext,
  client: ClientRecord,
  tokenPath: string,
): Promise<DpopProof | undefined> {
  const header = req.headers.dpop;
  if (!ctx.dpop) return undefined;
  if (header === undefined) {
    if (client.metadata.dpopBoundAccessTokens) {
      throw new OAuthError(
        'invalid_dpop_proof',
        'this client must send a DPoP proof (dpop_bound_access_tokens)',
      );
    }
    return undefined;
  }
  try {
    return await ctx.dpop.verify({ proof: header, method: 'POST', url: `${ctx.config.issuer}${tokenPath}` });
  } catch (error) {
    if (error instanceof DpopProofError) throw dpopOAuthError(error);
    throw error;
  }
}

/** Headers of a successful token response: the current `DPoP-Nonce` when nonces are required (§8.2). */
export function dpopSuccessHeaders(ctx: OAuthContext): Record<string, string> {
  const nonce = ctx.dpop && ctx.config.dpop?.requireNonce ? ctx.dpop.currentNonce() : undefined;
  return nonce ? { 'dpop-nonce': nonce } : {};
}
