/**
 * JWS signatures over Node `KeyObject`s for the signing algorithms of this server: RFC 7518 §3.3 (RS256),
 * §3.4 (ES256: R‖S, 64 bytes), §3.5 (PS256: MGF1-SHA-256, salt 32 bytes) and RFC 8037 §3.1
 * (EdDSA/Ed25519). Used on the event loop (thread-pool variant) and in the signing worker (synchronous
 * variant, `sign-worker.ts`); imports nothing but `node:crypto`.
 */
import { constants, type KeyObject, sign } from 'node:crypto';

/** JWS algorithms supported for the server's own tokens. RFC 9068 §2.1 requires RS256 among them. */
export const SUPPORTED_SIGNING_ALGS = ['RS256', 'PS256', 'ES256', 'EdDSA'] as const;
/** One of {@link SUPPORTED_SIGNING_ALGS}. */
export type SigningAlg = (typeof SUPPORTED_SIGNING_ALGS)[number];

type SignKey = Parameters<typeof sign>[2];

/**
 * The `crypto.sign` arguments of an algorithm: digest name (null for EdDSA) and key (with PSS padding for
 * PS256). ES256 signs with the bare `KeyObject` (DER output, converted by {@link derToP1363}): half the CPU
 * of `{ key, dsaEncoding: 'ieee-p1363' }` (measured on Node 24: ~30 vs ~62 µs per signature).
 * @throws RangeError for an algorithm outside {@link SUPPORTED_SIGNING_ALGS}.
 */
function signArgs(alg: string, key: KeyObject): { digest: string | null; signKey: SignKey } {
  switch (alg) {
    case 'RS256':
    case 'ES256':
      return { digest: 'sha256', signKey: key };
    case 'PS256':
      return {
        digest: 'sha256',
        signKey: { key, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: 32 },
      };
    case 'EdDSA':
      return { digest: null, signKey: key };
    default:
      throw new RangeError(`alg: must be one of ${SUPPORTED_SIGNING_ALGS.join(', ')}`);
  }
}

/**
 * A synchronous JWS signer: `(signing input) => signature` in the JWS encoding of `alg`.
 * @throws RangeError for an algorithm outside {@link SUPPORTED_SIGNING_ALGS}.
 */
export function syncSigner(alg: string, key: KeyObject): (data: Buffer) => Buffer {
  const { digest, signKey } = signArgs(alg, key);
  if (alg === 'ES256') return (data) => derToP1363(sign(digest, data, signKey), 32);
  return (data) => sign(digest, data, signKey);
}

/**
 * A JWS signer whose signatures are computed on libuv's thread pool (`crypto.sign` with a callback).
 * @throws RangeError for an algorithm outside {@link SUPPORTED_SIGNING_ALGS}.
 */
export function threadPoolSigner(alg: string, key: KeyObject): (data: Buffer) => Promise<Buffer> {
  const { digest, signKey } = signArgs(alg, key);
  const der = alg === 'ES256';
  return (data) =>
    new Promise<Buffer>((resolve, reject) =>
      sign(digest, data, signKey, (error, signature) => {
        if (error) reject(error);
        else resolve(der ? derToP1363(signature, 32) : signature);
      }),
    );
}

/**
 * Converts a DER `ECDSA-Sig-Value` (SEQUENCE of INTEGER r, INTEGER s; RFC 3279 §2.2.3) into the JWS form
 * R‖S with each integer left-padded to `size` bytes (RFC 7518 §3.4).
 * @throws Error when the input is not such a DER structure (never for OpenSSL's output).
 */
export function derToP1363(der: Buffer, size: number): Buffer {
  if (der[0] !== 0x30 || der.length < 8 || (der[1]! & 0x80) !== 0)
    throw new Error('ECDSA signature: bad DER');
  const out = Buffer.alloc(size * 2);
  let offset = 2;
  for (let i = 0; i < 2; i++) {
    if (der[offset] !== 0x02) throw new Error('ECDSA signature: bad DER');
    const length = der[offset + 1]!;
    let start = offset + 2;
    const end = start + length;
    while (end - start > size && der[start] === 0) start++;
    if (end - start > size || end > der.length) throw new Error('ECDSA signature: bad DER');
    der.copy(out, i * size + size - (end - start), start, end);
    offset = end;
  }
  return out;
}

/**
 * Converts a JWS ECDSA signature R‖S (RFC 7518 §3.4: two big-endian integers of `signature.length / 2`
 * bytes each) into the DER `ECDSA-Sig-Value` that `node:crypto` `verify()` takes by default (RFC 3279
 * §2.2.3): each integer without leading zero bytes, with one zero byte before a set high bit. Lengths fit
 * one DER length byte for the curves of this server (P-256, P-384, P-521: at most 66 bytes per integer).
 */
export function p1363ToDer(signature: Buffer): Buffer {
  const size = signature.length / 2;
  const integer = (from: number): Buffer => {
    let start = from;
    const end = from + size;
    while (start < end - 1 && signature[start] === 0) start++;
    const body = signature.subarray(start, end);
    return (body[0]! & 0x80) !== 0
      ? Buffer.concat([Buffer.of(0x02, body.length + 1, 0), body])
      : Buffer.concat([Buffer.of(0x02, body.length), body]);
  };
  const r = integer(0);
  const s = integer(size);
  const length = r.length + s.length;
  const prefix = length < 0x80 ? Buffer.of(0x30, length) : Buffer.of(0x30, 0x81, length);
  return Buffer.concat([prefix, r, s]);
}
