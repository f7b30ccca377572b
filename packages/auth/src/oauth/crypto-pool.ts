/**
 * Batched cryptography of the token endpoint on a worker thread (`crypto-worker.ts`): the JWS signatures
 * of the server's tokens and the JWS checks of DPoP proofs. Handing each signature to libuv's thread pool
 * costs the event loop about half as much as signing in place (job set-up, a thread hand-off and a
 * completion callback per signature); here the jobs requested during one turn of the event loop go to the
 * worker in one message per kind and come back in one message, so the event loop's cost per job is a few
 * array pushes.
 *
 * The worker starts on first use and takes jobs once it reports ready; until then, and for good if it
 * fails to start or exits, jobs run on the event loop's side (signatures on libuv's thread pool, proof
 * checks with `jose` in this thread), and the jobs in flight when it fails run there again: no request
 * fails because of the worker. It is referenced only while jobs are in flight, so it never keeps a process
 * alive. Private keys reach the worker as `KeyObject`s through its message port (they stay in this
 * process).
 */
import type { KeyObject } from 'node:crypto';
import { Worker } from 'node:worker_threads';
import { type ProofJws, ProofJwsChecker, type ProofJwsPolicy, ProofJwsRejected } from './dpop-jws.ts';
import { threadPoolSigner } from './jws-sign.ts';

/** The worker's module: `.ts` when running from source, `.js` from the published build. */
const WORKER_MODULE = import.meta.url.endsWith('.ts') ? './crypto-worker.ts' : './crypto-worker.js';

/** A key registered with {@link CryptoPool.register}. */
interface RegisteredKey {
  readonly id: number;
  /** Signs on libuv's thread pool: before the worker is ready, and after it failed. */
  readonly fallback: (data: Buffer) => Promise<Buffer>;
}

type Job =
  | {
      readonly kind: 'sign';
      readonly key: RegisteredKey;
      readonly input: string;
      readonly resolve: (signature: string) => void;
      readonly reject: (error: unknown) => void;
    }
  | {
      readonly kind: 'dpop';
      readonly proof: string;
      readonly policy: ProofJwsPolicy;
      readonly resolve: (checked: ProofJws) => void;
      readonly reject: (error: unknown) => void;
    };

type WorkerAnswer =
  | { op: 'ready' }
  | { op: 'signed'; batch: number; signatures: (string | null)[] }
  | {
      op: 'checked';
      batch: number;
      results: ({ ok: true; proof: ProofJws } | { ok: false; message: string })[];
    };

/** A signer for one registered key. */
export interface PooledSigner {
  /** The base64url JWS signature of an ASCII signing input (`base64url(header).base64url(payload)`). */
  sign(input: string): Promise<string>;
  /** Unregisters the key (the worker drops its copy); signing with it afterwards is a programming error. */
  release(): void;
}

/** Batches signatures and DPoP proof checks to one worker thread; see the module documentation. */
export class CryptoPool {
  #worker: Worker | undefined;
  #state: 'idle' | 'starting' | 'ready' | 'failed' = 'idle';
  #nextKeyId = 1;
  #nextBatch = 1;
  #queued: Job[] = [];
  /** Batches sent to the worker and not answered yet, by batch number. */
  readonly #inFlight = new Map<number, Job[]>();
  /** DPoP proof checks on this thread (before the worker is ready, or after it failed). */
  readonly #localProofs = new ProofJwsChecker();
  readonly #enabled: boolean;

  /** @param options.enabled false: never start the worker, every job runs on the event loop's side. */
  constructor(options: { enabled?: boolean } = {}) {
    this.#enabled = options.enabled ?? true;
  }

  /** Settled when the worker is ready (true) or unavailable (false). */
  #started: Promise<boolean> | undefined;
  #settleStarted: ((ready: boolean) => void) | undefined;

  /**
   * Starts the worker if needed. @returns a promise of true once the worker takes jobs, false when it
   * could not start or has exited (jobs then run on the event loop's side).
   */
  ready(): Promise<boolean> {
    this.#start();
    if (this.#state === 'starting' && this.#started) return this.#started;
    return Promise.resolve(this.#state === 'ready');
  }

  /**
   * Stops the worker; later jobs run on the event loop's side, and jobs in flight are redone there.
   * @returns a promise settled once the worker has exited.
   */
  async close(): Promise<void> {
    const worker = this.#worker;
    this.#fail();
    if (worker) await worker.terminate();
  }

  /**
   * Registers a private key of one of the `jws-sign.ts` algorithms.
   * @throws RangeError for another algorithm.
   */
  register(alg: string, key: KeyObject): PooledSigner {
    const registered: RegisteredKey = { id: this.#nextKeyId++, fallback: threadPoolSigner(alg, key) };
    this.#start();
    this.#worker?.postMessage({ op: 'key', id: registered.id, alg, key });
    return {
      sign: (input) =>
        new Promise<string>((resolve, reject) =>
          this.#submit({ kind: 'sign', key: registered, input, resolve, reject }),
        ),
      release: () => {
        // Jobs already queued for this key go out first (the worker handles messages in order).
        this.#flush();
        this.#worker?.postMessage({ op: 'forget', id: registered.id });
      },
    };
  }

  /**
   * Checks the JWS part of a DPoP proof (`dpop-jws.ts`).
   * @throws ProofJwsRejected naming the failed check.
   */
  checkDpopProof(proof: string, policy: ProofJwsPolicy): Promise<ProofJws> {
    this.#start();
    return new Promise<ProofJws>((resolve, reject) =>
      this.#submit({ kind: 'dpop', proof, policy, resolve, reject }),
    );
  }

  #submit(job: Job): void {
    if (this.#state !== 'ready') {
      this.#runInPlace(job);
      return;
    }
    this.#queued.push(job);
    if (this.#queued.length === 1) setImmediate(() => this.#flush());
  }

  #flush(): void {
    const jobs = this.#queued;
    this.#queued = [];
    if (jobs.length === 0) return;
    const worker = this.#worker;
    if (this.#state !== 'ready' || !worker) {
      for (const job of jobs) this.#runInPlace(job);
      return;
    }
    if (this.#inFlight.size === 0) worker.ref();
    const signs = jobs.filter((job) => job.kind === 'sign');
    const checks = jobs.filter((job) => job.kind === 'dpop');
    if (signs.length > 0) {
      const batch = this.#nextBatch++;
      this.#inFlight.set(batch, signs);
      worker.postMessage({
        op: 'sign',
        batch,
        keys: signs.map((job) => job.key.id),
        inputs: signs.map((job) => job.input),
      });
    }
    if (checks.length > 0) {
      const batch = this.#nextBatch++;
      this.#inFlight.set(batch, checks);
      worker.postMessage({
        op: 'dpop',
        batch,
        proofs: checks.map((job) => job.proof),
        policies: checks.map((job) => job.policy),
      });
    }
  }

  #start(): void {
    if (this.#state !== 'idle') return;
    if (!this.#enabled) {
      this.#state = 'failed';
      return;
    }
    this.#state = 'starting';
    this.#started = new Promise<boolean>((resolve) => {
      this.#settleStarted = resolve;
    });
    let worker: Worker;
    try {
      worker = new Worker(new URL(WORKER_MODULE, import.meta.url));
    } catch {
      this.#fail();
      return;
    }
    this.#worker = worker;
    worker.on('message', (message: WorkerAnswer) => this.#answer(message));
    worker.on('error', () => this.#fail());
    worker.on('exit', () => this.#fail());
    // After the listeners: attaching a 'message' listener refs the worker's port again.
    worker.unref();
  }

  #answer(message: WorkerAnswer): void {
    if (message.op === 'ready') {
      if (this.#state === 'starting') {
        this.#state = 'ready';
        this.#settleStarted?.(true);
      }
      return;
    }
    const jobs = this.#inFlight.get(message.batch);
    this.#inFlight.delete(message.batch);
    if (this.#inFlight.size === 0) this.#worker?.unref();
    if (!jobs) return;
    jobs.forEach((job, i) => {
      if (job.kind === 'sign' && message.op === 'signed') {
        const signature = message.signatures[i];
        // An item the worker could not sign (a key released while its job was queued, an OpenSSL error)
        // is signed on the thread pool instead, which rejects with the underlying error if that fails too.
        if (typeof signature === 'string') job.resolve(signature);
        else this.#runInPlace(job);
      } else if (job.kind === 'dpop' && message.op === 'checked') {
        const result = message.results[i];
        if (result?.ok) job.resolve(result.proof);
        else job.reject(new ProofJwsRejected(result?.message ?? 'DPoP proof rejected'));
      }
    });
  }

  /** The worker is gone: every job still owed runs on the event loop's side instead. */
  #fail(): void {
    this.#state = 'failed';
    this.#worker = undefined;
    this.#settleStarted?.(false);
    const owed = [...[...this.#inFlight.values()].flat(), ...this.#queued];
    this.#inFlight.clear();
    this.#queued = [];
    for (const job of owed) this.#runInPlace(job);
  }

  #runInPlace(job: Job): void {
    if (job.kind === 'sign') {
      job.key
        .fallback(Buffer.from(job.input, 'latin1'))
        .then((signature) => job.resolve(signature.toString('base64url')), job.reject);
    } else {
      this.#localProofs.check(job.proof, job.policy).then(job.resolve, job.reject);
    }
  }
}

/**
 * The process-wide pool: one worker serves every key manager and DPoP verifier of the process. Off unless
 * `AUTH_CRYPTO_WORKER=1`: it lowers the CPU per token request (event loop and total), but on the 2-core
 * benchmark machine at 16 connections it did not raise requests per second (a batch waits for its last
 * signature, and DPoP proof checks gain a thread hand-off), so signatures stay on libuv's thread pool by
 * default. See the README's token-endpoint benchmark.
 */
export const cryptoPool = new CryptoPool({ enabled: process.env.AUTH_CRYPTO_WORKER === '1' });
