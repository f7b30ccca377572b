/**
 * What BoxLite's published Node examples and SDK tests do (`examples/node/*.js`, `sdks/node/tests/*.ts`
 * of boxlite-ai/boxlite: exec features, copy, lifecycle, options validation), written for this SDK with
 * spec 002's names and run on both runtimes. Where BoxLite and spec 002 disagree the spec wins: the exit
 * code after a signal is 128 + signal (BoxLite reports -signal), `next()` returns lines.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { BoxError, type JsBox, type JsRuntime, SimpleBox } from '../src/index.ts';
import { BUSYBOX } from './runtime-helpers.ts';

async function output(box: JsBox, ...exec: Parameters<JsBox['exec']>) {
  const execution = await box.exec(...exec);
  const stdout = await execution.stdout();
  const lines: string[] = [];
  for (let line = await stdout.next(); line !== null; line = await stdout.next()) lines.push(line);
  return { lines, result: await execution.wait() };
}

/** Registers the BoxLite-style suite; boxes are named with `prefix`. */
export function boxliteSuite(
  title: string,
  prefix: string,
  setup: () => Promise<{ runtime: JsRuntime }>,
): void {
  describe(title, () => {
    let runtime: JsRuntime;
    let box: JsBox;
    let hostDir: string;
    const quiet = { image: BUSYBOX, network: { mode: 'disabled' as const } };

    before(async () => {
      runtime = (await setup()).runtime;
      box = await runtime.create(quiet, `${prefix}-bl`);
      hostDir = mkdtempSync('/tmp/sandbox-boxlite-');
    });

    after(async () => {
      await runtime.remove(`${prefix}-bl`, true).catch(() => {});
      rmSync(hostDir, { recursive: true, force: true });
    });

    it('exec(cmd, args, env, tty, user, timeoutSecs, workingDir): the positional extras apply', async () => {
      const { lines } = await output(
        box,
        'sh',
        ['-c', 'id -u; pwd; echo $X'],
        [['X', 'y']],
        false,
        '65534',
        10,
        '/tmp',
      );
      assert.deepEqual(lines, ['65534', '/tmp', 'y']);
      const timed = await output(box, 'sleep', ['30'], undefined, false, undefined, 0.3);
      assert.equal(timed.result.exitCode, 137);
      assert.match(timed.result.errorMessage ?? '', /timed out after 0.3 s/);
      assert.equal((await output(box, 'true')).result.errorMessage, undefined);
      await assert.rejects(
        box.exec('true', [], undefined, false, undefined, -1),
        (e: unknown) => e instanceof BoxError && e.field === 'timeoutSecs',
      );
    });

    it("signal(number) and signal(name); the exit code is 128 + signal (spec 002, not BoxLite's -signal)", async () => {
      const term = await box.exec('sleep', ['60']);
      await term.signal(15);
      assert.equal((await term.wait()).exitCode, 143);
      const usr1 = await box.exec('sleep', ['60']);
      await usr1.signal('SIGUSR1');
      assert.equal((await usr1.wait()).exitCode, 138);
      const bad = await box.exec('sleep', ['60']);
      await assert.rejects(bad.signal(999), (e: unknown) => e instanceof BoxError && e.field === 'signal');
      await bad.kill();
      assert.equal((await bad.wait()).exitCode, 137);
    });

    it('resizeTty(rows, cols) on a tty execution; a non-tty execution refuses', async () => {
      const shell = await box.exec('sh', [], undefined, true);
      await shell.resizeTty(33, 101);
      const stdin = await shell.stdin();
      await stdin.writeString('stty size; exit\n');
      const stdout = await shell.stdout();
      let seen = '';
      for (let line = await stdout.next(); line !== null; line = await stdout.next()) seen += `${line}\n`;
      assert.match(seen, /33 101/);
      await shell.wait();
      const plain = await box.exec('sleep', ['5']);
      await assert.rejects(
        plain.resizeTty(24, 80),
        (e: unknown) => e instanceof BoxError && e.code === 'conflict',
      );
      await plain.kill();
    });

    it('SimpleBox: a trailing object of the variadic exec is the environment', async () => {
      await using simple = new SimpleBox({ runtime, ...quiet, name: `${prefix}-bl-simple` });
      assert.equal((await simple.exec('sh', '-c', 'echo $X-$Y', { X: '1', Y: '2' })).stdout, '1-2\n');
      assert.equal((await simple.exec('echo', 'plain')).stdout, 'plain\n');
    });

    it('copy example (cp.js): a host directory into /app, listed from inside the box', async () => {
      const src = join(hostDir, 'boxlite_node_copy');
      mkdirSync(src, { recursive: true });
      writeFileSync(join(src, 'hello.txt'), 'hello from node\n');
      await box.copyIn(src, '/app', {});
      const { lines } = await output(box, 'cat', ['/app/hello.txt']);
      assert.deepEqual(lines, ['hello from node']);
      await box.copyOut('/app', join(hostDir, 'out'), {});
      assert.equal((await box.files.list('/app')).length, 1);
    });

    it('legacy option shapes are refused with a TypeError naming the field', async () => {
      await assert.rejects(runtime.create({ image: BUSYBOX, network: 'enabled' } as never), (e: unknown) => {
        assert.ok(e instanceof TypeError);
        assert.equal((e as TypeError & { field: string }).field, 'network');
        return true;
      });
      await assert.rejects(
        runtime.create({ image: BUSYBOX, allowNet: ['example.com'] } as never),
        (e: unknown) => {
          assert.ok(e instanceof TypeError);
          assert.equal((e as TypeError & { field: string }).field, 'allowNet');
          return true;
        },
      );
    });

    it('errors carry stable codes (not_found, conflict, invalid_option)', async () => {
      await assert.rejects(
        runtime.remove(`${prefix}-bl-none`),
        (e: unknown) => e instanceof BoxError && e.code === 'not_found',
      );
      await assert.rejects(
        runtime.remove(`${prefix}-bl`),
        (e: unknown) => e instanceof BoxError && e.code === 'conflict',
      );
      await assert.rejects(
        runtime.create({ image: BUSYBOX, cpus: -1 }),
        (e: unknown) => e instanceof BoxError && e.code === 'invalid_option' && e.field === 'cpus',
      );
    });

    it('images.pull returns what was asked, configDigest and layerCount (images example); list; remove', async () => {
      const pulled = await runtime.images.pull(BUSYBOX);
      assert.equal(pulled.reference, BUSYBOX);
      assert.match(pulled.configDigest, /^sha256:[0-9a-f]{64}$/);
      assert.equal(pulled.layerCount, 1);
      assert.match(pulled.resolvedReference, /\/library\/busybox:latest$/);
      const listed = (await runtime.images.list()).find((image) => image.id === pulled.digest);
      assert.equal(listed?.tag, 'latest');
      assert.equal(listed?.reference, pulled.resolvedReference);
      await assert.rejects(
        runtime.images.pull('127.0.0.1:5000/library/no-such-image:1'),
        (e: unknown) => e instanceof BoxError && e.code === 'image',
      );
      // In use by this suite's box.
      await assert.rejects(
        runtime.images.remove(BUSYBOX),
        (e: unknown) => e instanceof BoxError && e.code === 'conflict',
      );
      await assert.rejects(
        runtime.images.remove('127.0.0.1:5000/library/never-pulled:1'),
        (e: unknown) => e instanceof BoxError && e.code === 'not_found',
      );
    });
  });
}
