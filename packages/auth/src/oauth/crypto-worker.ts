/**
 * Worker thread of {@link CryptoPool} (`crypto-pool.ts`): computes JWS signatures and checks DPoP proof
 * signatures in batches, so that the event loop of the token endpoint spends its time on requests rather
 * than on cryptography and its hand-offs.
 *
 * Messages in (handled in order on one port):
 * - `{ op: 'key', id, alg, key }`: registers a private `KeyObject` under a numeric id;
 * - `{ op: 'forget', id }`: drops a registered key;
 * - `{ op: 'sign', batch, keys, inputs }`: signs `inputs[i]` (a JWS signing input, ASCII) with key
 *   `keys[i]` (`jws-sign.ts`);
 * - `{ op: 'dpop', batch, proofs, policies }`: checks the JWS part of each DPoP proof (`dpop-jws.ts`).
 * Messages out: `{ op: 'ready' }` once; `{ op: 'signed', batch, signatures }` with each base64url signature
 * or null when that item failed (unknown key, OpenSSL error: the pool then signs it on the event loop's
 * side, which reports the error); `{ op: 'checked', batch, results }` with `{ ok: true, proof }` or
 * `{ ok: false, message }` per proof.
 */
import type { KeyObject } from 'node:crypto';
import { parentPort } from 'node:worker_threads';
import { ProofJwsChecker, type ProofJwsPolicy } from './dpop-jws.ts';
import { syncSigner } from './jws-sign.ts';

/** A message the worker accepts. */
type Inbound =
  | { op: 'key'; id: number; alg: string; key: KeyObject }
  | { op: 'forget'; id: number }
  | { op: 'sign'; batch: number; keys: number[]; inputs: string[] }
  | { op: 'dpop'; batch: number; proofs: string[]; policies: ProofJwsPolicy[] };

const signers = new Map<number, (data: Buffer) => Buffer>();
const proofs = new ProofJwsChecker();

parentPort?.on('message', (message: Inbound) => {
  switch (message.op) {
    case 'key':
      signers.set(message.id, syncSigner(message.alg, message.key));
      return;
    case 'forget':
      signers.delete(message.id);
      return;
    case 'sign': {
      const signatures = message.inputs.map((input, i) => {
        const signer = signers.get(message.keys[i]!);
        try {
          return signer ? signer(Buffer.from(input, 'latin1')).toString('base64url') : null;
        } catch {
          return null;
        }
      });
      parentPort?.postMessage({ op: 'signed', batch: message.batch, signatures });
      return;
    }
    case 'dpop':
      void Promise.all(
        message.proofs.map((proof, i) =>
          proofs.check(proof, message.policies[i]!).then(
            (checked) => ({ ok: true, proof: checked }),
            (error: unknown) => ({
              ok: false,
              message: error instanceof Error ? error.message : String(error),
            }),
          ),
        ),
      ).then((results) => parentPort?.postMessage({ op: 'checked', batch: message.batch, results }));
      return;
  }
});
parentPort?.postMessage({ op: 'ready' });
