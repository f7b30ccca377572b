/**
 * The asymmetric JWS algorithms (RFC 7518 §3.1, RFC 8037 for EdDSA/Ed25519) this server verifies where a
 * client proves possession of a private key: DPoP proofs (RFC 9449 §4.2) and `private_key_jwt` client
 * assertions (RFC 7523 §2.2). Symmetric `HS*` algorithms are never accepted there.
 */
export const ASYMMETRIC_JWS_ALGS: readonly string[] = Object.freeze([
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
  'Ed25519',
  'PS256',
  'PS384',
  'PS512',
  'RS256',
  'RS384',
  'RS512',
]);
