/**
 * InteractiveBox (spec 002): a real terminal session driven through tmux (send-keys / capture-pane), the
 * way a user at a terminal would use it, and the no-forwarding mode driven programmatically.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { BoxError, InteractiveBox } from '../src/index.ts';
import {
  BUSYBOX,
  cleanupAll,
  ensureRegistry,
  GVISOR_SKIP,
  REGISTRIES,
  tempHome,
  testRuntime,
} from './runtime-helpers.ts';

const src = join(import.meta.dirname, '..', 'src', 'index.ts');

/** A tmux server of its own (socket in a temp dir) running one pane. */
class Tmux {
  readonly socket: string;
  constructor(dir: string) {
    this.socket = join(dir, 'tmux.sock');
  }
  run(...args: string[]): string {
    const r = spawnSync('tmux', ['-S', this.socket, ...args], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`tmux ${args[0]}: ${r.stderr}`);
    return r.stdout;
  }
  screen(): string {
    return this.run('capture-pane', '-p', '-t', 's');
  }
  /** Waits until the pane shows text matching `re` (the session is a real program: it takes a moment). */
  async waitFor(re: RegExp, what: string): Promise<string> {
    for (let i = 0; i < 600; i++) {
      const screen = this.screen();
      if (re.test(screen)) return screen;
      await sleep(50);
    }
    throw new Error(`tmux pane never showed ${what}; screen:\n${this.screen()}`);
  }
  keys(...keys: string[]): void {
    this.run('send-keys', '-t', 's', ...keys);
  }
  kill(): void {
    spawnSync('tmux', ['-S', this.socket, 'kill-server']);
  }
}

before(() => ensureRegistry());
after(cleanupAll);

describe('InteractiveBox', () => {
  for (const isolation of ['container', 'gvisor'] as const) {
    const skip = isolation === 'gvisor' ? GVISOR_SKIP : false;
    it(`forwards a terminal (${isolation} tier): keystrokes reach the shell, output comes back, Ctrl-C and exit work`, {
      skip,
    }, async () => {
      const home = tempHome('sandbox-ia-');
      const program = join(home, 'session.ts');
      writeFileSync(
        program,
        [
          `import { InteractiveBox, JsRuntime } from ${JSON.stringify(src)};`,
          `process.env.SEED_SANDBOX_GVISOR_PLATFORM ??= 'ptrace';`,
          `const runtime = new JsRuntime({ homeDir: ${JSON.stringify(home)}, imageRegistries: ${JSON.stringify(REGISTRIES)}, isolation: '${isolation}' });`,
          `const box = new InteractiveBox({ runtime, image: ${JSON.stringify(BUSYBOX)} });`,
          'await box.start();',
          'await box.wait();',
          'await box.stop();',
          "console.log('SESSION-ENDED');",
        ].join('\n'),
      );
      const tmux = new Tmux(home);
      try {
        tmux.run(
          'new-session',
          '-d',
          '-s',
          's',
          '-x',
          '100',
          '-y',
          '30',
          `${process.execPath} ${program}; echo "node exited $?"; sleep 600`,
        );
        await tmux.waitFor(/^~ #/m, 'the shell prompt');
        tmux.keys('echo $((6*7)); tty; test -t 0 && echo is-a-tty; stty size; hostname | wc -c', 'Enter');
        const screen = await tmux.waitFor(/^27$/m, 'the command output');
        assert.match(screen, /^30 100$/m, 'the box terminal has the size of the tmux pane');
        assert.match(screen, /^42$/m);
        assert.match(screen, /^is-a-tty$/m, 'the shell has a terminal');
        // The container tier's terminal is one of the box's devpts; gVisor's Sentry emulates the host
        // terminal it was handed, which has no name in the box (busybox `tty` says "not a tty").
        if (isolation === 'container') assert.match(screen, /^\/dev\/pts\/\d+$/m, 'a terminal of the box');
        // A resize of the caller's terminal reaches the box's terminal.
        tmux.run('resize-window', '-t', 's', '-x', '90', '-y', '25');
        // (SIGWINCH delivery is asynchronous: ask again until the shell reports the new size.)
        for (let i = 0; i < 50 && !/^25 90$/m.test(tmux.screen()); i++) {
          tmux.keys('clear; stty size', 'Enter');
          await sleep(200);
        }
        await tmux.waitFor(/^25 90$/m, 'the new terminal size');
        // Ctrl-C goes to the box's terminal (raw mode), interrupting the command, not the SDK process.
        tmux.keys('sleep 300', 'Enter');
        await tmux.waitFor(/sleep 300\n/, 'the sleep command echoed');
        tmux.keys('C-c');
        tmux.keys('echo status=$?', 'Enter');
        await tmux.waitFor(/^status=130$/m, 'the interrupted command status');
        tmux.keys('exit', 'Enter');
        const end = await tmux.waitFor(/node exited \d+/, 'the SDK program ending');
        assert.match(end, /^SESSION-ENDED$/m);
        assert.match(end, /node exited 0/);
      } finally {
        tmux.kill();
      }
    });
  }

  it('without forwarding (tty: false) the shell is driven through session(); wait() ends at its exit', async () => {
    const runtime = testRuntime();
    const box = new InteractiveBox({ runtime, image: BUSYBOX, tty: false });
    assert.equal(box.forwarding, false);
    await assert.rejects(box.wait(), /not started/);
    await box.start();
    await assert.rejects(box.start(), BoxError);
    const session = box.session();
    const stdin = await session.stdin();
    const stdout = await session.stdout();
    await stdin.writeString('test -t 0 && echo tty || echo no-tty; echo "$0"\n');
    assert.equal(await stdout.next(), 'no-tty');
    assert.equal(await stdout.next(), '/bin/sh');
    await stdin.writeString('exit 3\n');
    await box.wait();
    assert.deepEqual(await session.wait(), { exitCode: 3 });
    await box.stop();
  });

  it('tty undefined forwards exactly when the caller stdin is a terminal; true forces it', () => {
    const streams = (isTTY: boolean) => ({
      stdin: Object.assign(new PassThrough(), { isTTY }),
      stdout: new PassThrough(),
      stderr: new PassThrough(),
    });
    assert.equal(new InteractiveBox({}, undefined, streams(true)).forwarding, true);
    assert.equal(new InteractiveBox({}, undefined, streams(false)).forwarding, false);
    assert.equal(new InteractiveBox({ tty: true }, undefined, streams(false)).forwarding, true);
    assert.equal(new InteractiveBox({ tty: false }, undefined, streams(true)).forwarding, false);
  });

  it('rejects bad options naming the field', () => {
    assert.throws(() => new InteractiveBox({ shell: '' }), { name: 'BoxError', field: 'shell' });
    assert.throws(() => new InteractiveBox({ tty: 'yes' as unknown as boolean }), {
      name: 'BoxError',
      field: 'tty',
    });
  });
});
