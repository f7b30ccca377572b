/**
 * Test fixture of the self-service tests: a real SMTP server (Debian's `python3-aiosmtpd`, installed by the
 * package's `test:setup`) whose received messages the test reads, and the link of a message.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { connect, createServer } from 'node:net';

/**
 * The SMTP server: `python3 -u -m aiosmtpd -n -l 127.0.0.1:<port>`, printing each message to its stdout
 * (`-u`: unbuffered, since Python block-buffers a pipe and a message would otherwise wait for 8 KiB more).
 */
export class SmtpSink {
  readonly port: number;
  readonly #child: ChildProcess;
  #output = '';

  private constructor(port: number, child: ChildProcess) {
    this.port = port;
    this.#child = child;
    child.stdout!.on('data', (chunk: Buffer) => {
      this.#output += chunk.toString('utf8');
    });
  }

  static async start(): Promise<SmtpSink> {
    const port = await new Promise<number>((resolve) => {
      const probe = createServer().listen(0, '127.0.0.1', () => {
        const { port } = probe.address() as { port: number };
        probe.close(() => resolve(port));
      });
    });
    const child = spawn('/usr/bin/python3', ['-u', '-m', 'aiosmtpd', '-n', '-l', `127.0.0.1:${port}`], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    for (let attempt = 0; ; attempt++) {
      const up = await new Promise<boolean>((resolve) => {
        const socket = connect(port, '127.0.0.1', () => {
          socket.end();
          resolve(true);
        }).on('error', () => resolve(false));
      });
      if (up) break;
      if (attempt > 200) throw new Error('aiosmtpd did not start (run npm run test:setup -w @seed/auth)');
      await new Promise((r) => setTimeout(r, 25));
    }
    return new SmtpSink(port, child);
  }

  /** Messages received so far, quoted-printable decoded. */
  messages(): string[] {
    const decoded = this.#output
      .replace(/=\r?\n/g, '')
      .replace(/=([0-9A-F]{2})/g, (_, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)));
    return decoded.split('---------- MESSAGE FOLLOWS ----------').slice(1);
  }

  /** Waits for message number `n` (0-based) and returns it. */
  async message(n: number): Promise<string> {
    for (let attempt = 0; attempt < 400; attempt++) {
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
