/**
 * Password hashing with scrypt from `node:crypto` at OWASP parameters, the parameters stored with the hash
 * so that they can be raised later.
 *
 * Encoded form (PHC string format): `$scrypt$ln=<log2 N>,r=<r>,p=<p>$<salt base64>$<hash base64>`
 * (unpadded standard base64). Defaults follow the OWASP Password Storage Cheat Sheet: N = 2^17, r = 8,
 * p = 1 (128 MiB of memory per hash), 16-byte salt, 32-byte key.
 */
import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto';
import { ValidationError } from './errors.ts';

/** scrypt cost parameters. */
export interface ScryptParams {
  /** log2 of the CPU/memory cost N (N = 2^ln). OWASP minimum: 17. Range 10–22. */
  readonly ln: number;
  /** block size r (OWASP: 8). Range 1–32. */
  readonly r: number;
  /** parallelization p (OWASP: 1). Range 1–16. */
  readonly p: number;
}

/** OWASP-recommended scrypt parameters: N = 2^17, r = 8, p = 1. */
export const OWASP_SCRYPT_PARAMS: ScryptParams = Object.freeze({ ln: 17, r: 8, p: 1 });

const KEY_LENGTH = 32;
const SALT_LENGTH = 16;
/** Longest password accepted, in characters (bounds the work a request can cause). */
export const MAX_PASSWORD_LENGTH = 1024;

interface Decoded {
  params: ScryptParams;
  salt: Buffer;
  hash: Buffer;
}

const ENCODED = /^\$scrypt\$ln=(\d{1,2}),r=(\d{1,2}),p=(\d{1,2})\$([A-Za-z0-9+/]+)\$([A-Za-z0-9+/]+)$/;

function decode(encoded: string): Decoded | undefined {
  const m = ENCODED.exec(encoded);
  if (!m) return undefined;
  const params = { ln: Number(m[1]), r: Number(m[2]), p: Number(m[3]) };
  if (!validParams(params)) return undefined;
  return { params, salt: Buffer.from(m[4]!, 'base64'), hash: Buffer.from(m[5]!, 'base64') };
}

function validParams(p: ScryptParams): boolean {
  return (
    Number.isInteger(p.ln) &&
    p.ln >= 10 &&
    p.ln <= 22 &&
    Number.isInteger(p.r) &&
    p.r >= 1 &&
    p.r <= 32 &&
    Number.isInteger(p.p) &&
    p.p >= 1 &&
    p.p <= 16
  );
}

function derive(password: string, salt: Buffer, params: ScryptParams, length: number): Promise<Buffer> {
  const N = 2 ** params.ln;
  // scrypt needs 128 * N * r * p bytes; allow twice that.
  const maxmem = 256 * N * params.r * params.p + 1024 * 1024;
  return new Promise((resolve, reject) => {
    scrypt(password.normalize('NFKC'), salt, length, { N, r: params.r, p: params.p, maxmem }, (err, key) =>
      err ? reject(err) : resolve(key),
    );
  });
}

const b64 = (buf: Buffer) => buf.toString('base64').replace(/=+$/, '');

/** Options of {@link PasswordHasher}. */
export interface PasswordHasherOptions {
  /** Parameters for new hashes (default {@link OWASP_SCRYPT_PARAMS}). Lower only in tests. */
  params?: ScryptParams;
  /** Shortest password {@link PasswordHasher.hash} accepts, in characters (default 8). */
  minLength?: number;
}

/** Hashes and verifies passwords (scrypt, PHC-encoded, parameters stored with the hash). */
export class PasswordHasher {
  /** Parameters used for new hashes. */
  readonly params: ScryptParams;
  readonly minLength: number;

  /** @throws RangeError when `params` are out of range (ln 10–22, r 1–32, p 1–16). */
  constructor(options: PasswordHasherOptions = {}) {
    this.params = Object.freeze({ ...(options.params ?? OWASP_SCRYPT_PARAMS) });
    if (!validParams(this.params))
      throw new RangeError('scrypt params out of range (ln 10–22, r 1–32, p 1–16)');
    this.minLength = options.minLength ?? 8;
  }

  /**
   * Checks a new password against the length rules.
   * @throws ValidationError (field `password`, rule `required` | `min_length` | `max_length`).
   */
  assertAcceptable(password: unknown): asserts password is string {
    if (typeof password !== 'string' || password.length === 0) {
      throw new ValidationError('password', 'required', 'password: required (non-empty string)');
    }
    if (password.length < this.minLength) {
      throw new ValidationError('password', 'min_length', `password: at least ${this.minLength} characters`);
    }
    if (password.length > MAX_PASSWORD_LENGTH) {
      throw new ValidationError(
        'password',
        'max_length',
        `password: at most ${MAX_PASSWORD_LENGTH} characters`,
      );
    }
  }

  /**
   * Hashes a password with a fresh random salt.
   * @returns the PHC-encoded hash (`$scrypt$ln=..,r=..,p=..$salt$hash`).
   * @throws ValidationError when the password breaks the length rules.
   */
  async hash(password: string): Promise<string> {
    this.assertAcceptable(password);
    const salt = randomBytes(SALT_LENGTH);
    const key = await derive(password, salt, this.params, KEY_LENGTH);
    const { ln, r, p } = this.params;
    return `$scrypt$ln=${ln},r=${r},p=${p}$${b64(salt)}$${b64(key)}`;
  }

  /**
   * Verifies a password against an encoded hash in constant time. A malformed hash or an overlong password
   * gives `false` (never throws for bad input).
   */
  async verify(password: string, encoded: string): Promise<boolean> {
    const decoded = decode(encoded);
    if (!decoded || typeof password !== 'string' || password.length > MAX_PASSWORD_LENGTH) return false;
    const key = await derive(password, decoded.salt, decoded.params, decoded.hash.length);
    return key.length === decoded.hash.length && timingSafeEqual(key, decoded.hash);
  }

  /** True when the hash is malformed or was made with parameters other than {@link params}. */
  needsRehash(encoded: string): boolean {
    const decoded = decode(encoded);
    if (!decoded) return true;
    const { ln, r, p } = decoded.params;
    return (
      ln !== this.params.ln ||
      r !== this.params.r ||
      p !== this.params.p ||
      decoded.hash.length !== KEY_LENGTH
    );
  }
}
