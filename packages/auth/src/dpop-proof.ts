/**
 * What the permission middleware needs to know of DPoP (RFC 9449) without loading the proof verifier:
 * the refused-proof error, the `WWW-Authenticate: DPoP` challenge (§7.1), the accepted algorithms and the
 * shape of a proof check. The verifier itself (`DpopProofVerifier` in `oauth/dpop.ts`) implements
 * {@link DpopProofChecker} and is handed to the token verifier by the composition root.
 */
import { InvalidTokenError } from './errors.ts';
import { ASYMMETRIC_JWS_ALGS } from './jws-algs.ts';

/** The RFC 9449 error codes (§5, §7.1, §8, §12.2). */
export type DpopErrorCode = 'invalid_dpop_proof' | 'use_dpop_nonce';

/**
 * A refused DPoP proof. `code` is `invalid_dpop_proof` (bad, stale or replayed proof) or `use_dpop_nonce`
 * (the server requires a nonce and the proof lacks the current one); `nonce` is then the value the client
 * must use (sent as the `DPoP-Nonce` header). Extends {@link InvalidTokenError} so that the permission
 * middleware treats it as an invalid credential (401).
 */
export class DpopProofError extends InvalidTokenError {
  readonly dpopError: DpopErrorCode;
  readonly nonce: string | undefined;
  constructor(code: DpopErrorCode, message: string, nonce?: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'DpopProofError';
    this.dpopError = code;
    this.nonce = nonce;
  }
}

/** JWS algorithms accepted for DPoP proofs (asymmetric only, RFC 9449 §4.2; `dpop_signing_alg_values_supported`). */
export const DPOP_SIGNING_ALGS = ASYMMETRIC_JWS_ALGS;

/** What a proof is checked against. */
export interface DpopProofExpectation {
  /** The `DPoP` header(s) of the request (more than one is an error, §4.3 check 1). */
  readonly proof: string | readonly string[] | undefined;
  /** HTTP method of the request (`htm`). */
  readonly method: string;
  /** Absolute URL of the request (`htu`; query and fragment are ignored, §4.3 check 9). */
  readonly url: string;
  /** The access token presented with the proof: `ath` must be its hash (§4.3 check 11, §7). */
  readonly accessToken?: string;
  /** The token's `cnf.jkt`: the proof's key must have this thumbprint (§7.1). */
  readonly jkt?: string;
}

/** Checks the DPoP proof of a request (implemented by `DpopProofVerifier`). @throws DpopProofError. */
export interface DpopProofChecker {
  verify(expected: DpopProofExpectation): Promise<unknown>;
}

/**
 * The `WWW-Authenticate` challenge of a DPoP-protected resource (RFC 9449 §7.1): `DPoP algs="…"`, plus
 * `error` and `error_description` when a request was refused.
 */
export function dpopChallenge(algorithms: readonly string[], error?: string, description?: string): string {
  let value = `DPoP algs="${algorithms.join(' ')}"`;
  if (error) value += `, error="${error}"`;
  if (description) value += `, error_description="${description.replace(/["\\]/g, '')}"`;
  return value;
}
