/**
 * The spare supervisor (spare-supervisor.ts): an idle `/bin/sh supervisor-spare.sh` made while the
 * engine is idle or right after a box stops serves the next box without host paths — the box's
 * supervisor is that very process, with the command line and environment of a spawned one, and a
 * hostname full of shell syntax reaches the box as it is (nothing of it runs). A box with host paths
 * gets a supervisor spawned for it (the spare inherits no descriptors). An idle spare whose creator is
 * SIGKILLed exits, and a box a spare served is torn down when its creator is SIGKILLed, as a spawned
 * supervisor's box is. Real crun/runc boxes on a busybox layer.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
// internal: the engine's spare supervisor is tested through the engine
import { mountsUnder } from '../src/engine/index.ts';
import { engineTestBed, execSh, supervisorPid } from './helpers/engine.ts';

const bed = engineTestBed('engine-spare-', 'spr');
const stateRoot = join(bed.tmp, 'state');
const spareScript = join(stateRoot, 'bin', 'supervisor-spare.sh');
const engineIndex = fileURLToPath(new URL('../src/engine/index.ts', import.meta.url));

/** The NUL-separated command line of `pid` split, or null when it is gone. */
function cmdline(pid: number): string[] | null {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').slice(0, -1);
  } catch {
    return null;
  }
}

/** True while `pid` exists and is not a zombie. */
function alive(pid: number): boolean {
  try {
    return !/\) [ZX] /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

/** Pids of the idle spares of `stateRoot` whose parent is `parent` (live, not zombies). */
function sparesOf(parent: number): number[] {
  const out: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const argv = cmdline(+name);
    if (argv?.[1] !== spareScript || !alive(+name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === parent) out.push(+name);
    } catch {}
  }
  return out;
}

async function until(what: string, cond: () => boolean, ms = 15_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

test('a spare supervisor serves the next box: same process, the command line and environment of a spawned one', async () => {
  const { engine } = bed;
  const cwd = process.cwd();
  process.chdir(bed.tmp);
  try {
    const first = bed.spec();
    await engine.start(first);
    await engine.remove(first.id, first.boxDir);
    await until('a spare after the removal', () => sparesOf(process.pid).length === 1);
    const [spare] = sparesOf(process.pid);
    // Shell syntax in a value the spare loads: it must reach the box as it is and run nothing.
    const hostname = `q'"$(touch\${IFS}pwned)\`touch\${IFS}pwned2\`'x`;
    const s = bed.spec({ detach: false, hostname });
    await engine.start(s);
    const watch = await supervisorPid(s.boxDir);
    assert.equal(watch, spare, 'the spare is the box supervisor');
    assert.deepEqual(cmdline(watch), ['/bin/sh', join(stateRoot, 'bin', 'supervisor.sh')]);
    const environ = readFileSync(`/proc/${watch}/environ`, 'utf8').split('\0');
    assert.ok(environ.includes(`SB_ID=${s.id}`), 'its environment names the box');
    assert.ok(environ.includes(`SB_HOSTNAME=${hostname}\n`));
    const inBox = await execSh(engine, s.id, 'hostname; cat /etc/hostname');
    assert.equal(inBox.stdout, `${hostname}\n${hostname}\n`);
    assert.deepEqual(
      readdirSync(bed.tmp).filter((f) => f.startsWith('pwned')),
      [],
      'nothing of the value ran',
    );
    // The spare that served is not idle any more (the engine may have made the next one meanwhile).
    assert.ok(!sparesOf(process.pid).includes(spare as number));
    await engine.remove(s.id, s.boxDir);
    await until('the supervisor released', () => !alive(watch));
    await until('a new spare', () => sparesOf(process.pid).length === 1);
    assert.notEqual(sparesOf(process.pid)[0], spare);
  } finally {
    process.chdir(cwd);
    for (const b of await engine.list()) await engine.remove(b.id, b.boxDir ?? join(bed.tmp, 'boxes', b.id));
  }
});

test('a box with host paths gets a supervisor of its own; the idle spare stays', async () => {
  const { engine } = bed;
  await until('an idle spare', () => sparesOf(process.pid).length === 1);
  const [spare] = sparesOf(process.pid);
  const vol = join(bed.tmp, 'vol');
  mkdirSync(vol);
  writeFileSync(join(vol, 'marker'), 'x');
  const s = bed.spec({ detach: false, mounts: [{ hostPath: vol, guestPath: '/mnt', readOnly: true }] });
  await engine.start(s);
  try {
    const watch = await supervisorPid(s.boxDir);
    assert.ok(watch > 0 && watch !== spare, 'a spawned supervisor');
    assert.equal((await execSh(engine, s.id, 'cat /mnt/marker')).stdout, 'x');
    assert.deepEqual(sparesOf(process.pid), [spare], 'the spare still waits');
  } finally {
    await engine.remove(s.id, s.boxDir);
  }
  assert.equal(readFileSync(join(vol, 'marker'), 'utf8'), 'x', 'the host path is left as it was');
});

/** Starts a Node child that makes an engine on `stateRoot`, runs `body` and prints one JSON line. */
async function creator(body: string): Promise<{ child: ChildProcess; out: Record<string, number> }> {
  const script = join(bed.tmp, `creator-${Date.now()}.ts`);
  writeFileSync(
    script,
    `import { createEngine } from ${JSON.stringify(engineIndex)};
const engine = await createEngine({ stateRoot: ${JSON.stringify(stateRoot)} });
const spec = (id, detach) => ({ id, hostname: id, layerDirs: [${JSON.stringify(bed.rootfs)}],
  boxDir: ${JSON.stringify(join(bed.tmp, 'boxes'))} + '/' + id, env: ['PATH=/bin'], workingDir: '/', cpus: 1,
  memoryMib: 64, pidsLimit: 64, mounts: [], capabilities: { add: [], drop: [] },
  network: { mode: 'disabled', allowNet: [] }, detach });
${body}
setInterval(() => {}, 1000);
`,
  );
  const child = spawn(process.execPath, ['--conditions=seed-source', script], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const out = await new Promise<Record<string, number>>((resolve, reject) => {
    child.stdout?.once('data', (d: Buffer) => resolve(JSON.parse(d.toString())));
    child.once('exit', (code) => reject(new Error(`the creator exited with ${code}`)));
  });
  return { child, out };
}

test('an idle spare whose creator is SIGKILLed exits and leaves nothing', async () => {
  // The creator does nothing: its engine makes a spare once it has been idle for a moment.
  const { child } = await creator(`console.log(JSON.stringify({}));`);
  const pid = child.pid as number;
  await until("the creator's spare", () => sparesOf(pid).length === 1);
  const [spare] = sparesOf(pid);
  child.kill('SIGKILL');
  await until('the spare gone', () => !alive(spare as number));
  assert.deepEqual(mountsUnder(join(bed.tmp, 'boxes')), []);
});

test('a box a spare served is gone when its creator is SIGKILLed', async () => {
  const id = `sprk${process.pid}`;
  const { child, out } = await creator(
    `const warm = spec('${id}w', true);
await import('node:fs').then((fs) => fs.mkdirSync(warm.boxDir, { recursive: true }));
await engine.start(warm);
await engine.remove(warm.id, warm.boxDir);
const box = spec('${id}', false);
(await import('node:fs')).mkdirSync(box.boxDir, { recursive: true });
const fs = await import('node:fs');
const spares = fs.readdirSync('/proc').filter((p) => {
  try {
    const argv = fs.readFileSync('/proc/' + p + '/cmdline', 'utf8').split('\\0');
    const stat = fs.readFileSync('/proc/' + p + '/stat', 'utf8');
    return argv[1] === ${JSON.stringify(spareScript)} && Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === process.pid;
  } catch { return false; }
});
const { pid } = await engine.start(box);
console.log(JSON.stringify({ pid, spare: spares.length === 1 ? Number(spares[0]) : 0 }));`,
  );
  const boxDir = join(bed.tmp, 'boxes', id);
  const watch = await supervisorPid(boxDir);
  assert.ok(out.spare, 'the creator had one idle spare before the start');
  assert.equal(watch, out.spare, 'the spare is the box supervisor');
  assert.deepEqual(cmdline(watch), ['/bin/sh', join(stateRoot, 'bin', 'supervisor.sh')]);
  assert.ok(alive(out.pid as number), 'the box runs');
  child.kill('SIGKILL');
  await until('the box init gone', () => !alive(out.pid as number));
  await until('the supervisor gone', () => !alive(watch));
  assert.deepEqual(mountsUnder(boxDir), []);
});
