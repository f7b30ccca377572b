/**
 * Test fixture of the self-service tests: a real SMTP server (Debian's `python3-aiosmtpd`, installed by the
 * package's `test:setup`) whose received messages the test reads, and the link of a message.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';

/**
 * The server program: aiosmtpd's SMTP protocol with its `Debugging` handler (what `python3 -m aiosmtpd
 * -n` runs), listening on a port the kernel picks in this very bind (a port probed free and bound later
 * could be taken meanwhile by another test file's server), and printing `port <n>` once it listens.
 */
const SERVE = `
import asyncio, sys
from aiosmtpd.handlers import Debugging
from aiosmtpd.smtp import SMTP

async def main():
    server = await asyncio.get_running_loop().create_server(
        lambda: SMTP(Debugging(sys.stdout)), host='127.0.0.1', port=0)
    print('port', server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()

asyncio.run(main())
`;

/**
 * The SMTP server ({@link SERVE}, run by `python3 -u`), printing each message to its stdout (`-u`:
 * unbuffered, since Python block-buffers a pipe and a message would otherwise wait for 8 KiB more).
 */
export class SmtpSink {
  readonly #child: ChildProcess;
  #port = 0;
  /** Everything the server printed: `port <n>`, then the messages. */
  #output = '';

  private constructor(child: ChildProcess) {
    this.#child = child;
    child.stdout!.on('data', (chunk: Buffer) => {
      this.#output += chunk.toString('utf8');
    });
  }

  /** The loopback port the server listens on. */
  get port(): number {
    return this.#port;
  }

  /** Starts the server; resolves once it listens. @throws when it exits or has not listened within 30 s. */
  static async start(): Promise<SmtpSink> {
    const child = spawn('/usr/bin/python3', ['-u', '-c', SERVE], { stdio: ['ignore', 'pipe', 'inherit'] });
    const sink = new SmtpSink(child);
    sink.#port = await new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => {
        child.kill();
        reject(new Error('aiosmtpd did not listen within 30 s'));
      }, 30_000);
      const exited = (code: number | null) => {
        clearTimeout(timer);
        reject(new Error(`aiosmtpd exited with ${code} (run npm run test:setup -w @seed/auth)`));
      };
      // Added after the sink's own listener, so it sees the output with this chunk.
      const printed = () => {
        const line = /^port (\d+)\n/.exec(sink.#output);
        if (!line) return;
        clearTimeout(timer);
        child.off('exit', exited);
        child.stdout!.off('data', printed);
        resolve(Number(line[1]));
      };
      child.once('exit', exited);
      child.stdout!.on('data', printed);
    });
    return sink;
  }

  /** Messages received so far, quoted-printable decoded. */
  messages(): string[] {
    const decoded = this.#output
      .replace(/=\r?\n/g, '')
      .replace(/=([0-9A-F]{2})/g, (_, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)));
    return decoded.split('---------- MESSAGE FOLLOWS ----------').slice(1);
  }

  /** Waits up to 30 s (a loaded machine delivers slowly) for message number `n` (0-based) and returns it. */
  async message(n: number): Promise<string> {
    for (const end = Date.now() + 30_000; Date.now() < end; ) {
      const all = this.messages();
      if (all.length > n && all[n]!.includes('------------ END MESSAGE ------------')) return all[n]!;
      await new Promise((r) => setTimeout(r, 25));
    }
    throw new Error(`no message ${n}; got ${this.messages().length}`);
  }

  stop(): void {
    this.#child.kill();
  }
}

/** The link of a message to `path` (`https?://…<path>?token=…`); fails the test when there is none. */
export function linkIn(message: string, path: string): URL {
  const match = new RegExp(`https?://\\S+${path}\\?token=[A-Za-z0-9_-]+`).exec(message);
  assert.ok(match, `no ${path} link in ${message}`);
  return new URL(match[0]);
}
