/**
 * An agent's box across turns: one box keeps its files and processes between the turns of an agent,
 * paused while the agent thinks, resumed by the next command, with a timeout that pauses it if the agent
 * goes away; a snapshot taken after a good turn brings back what a bad turn broke; the box is exported
 * to an archive and imported by another runtime (another homeDir, as on another machine); removed at the
 * end.
 *
 * Run (root): `node examples/agent-turns.ts` — uses the default runtime (`SANDBOX_HOME` or
 * `~/.sandbox`); `SANDBOX_EXAMPLE_REGISTRY=127.0.0.1:5000` pulls `busybox:latest` from that plain-HTTP
 * registry (the tests' local one) instead of Docker Hub. Prints one line per step.
 *
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { JsRuntime } from '../src/js-runtime.ts';
import type { JsImageRegistry } from '../src/types.ts';

const registry = process.env.SANDBOX_EXAMPLE_REGISTRY;
const imageRegistries: JsImageRegistry[] = registry
  ? [{ host: registry, transport: 'http', search: true }]
  : [];
const runtime = new JsRuntime({ imageRegistries });

/** Runs a shell command in the box; its stdout, trimmed. Throws on a non-zero exit. */
async function sh(box: Awaited<ReturnType<JsRuntime['create']>>, script: string): Promise<string> {
  const execution = await box.exec('sh', ['-c', script]);
  const out: string[] = [];
  const stdout = await execution.stdout();
  for (let line = await stdout.next(); line !== null; line = await stdout.next()) out.push(line);
  const { exitCode } = await execution.wait();
  if (exitCode !== 0) throw new Error(`'${script}' exited with ${exitCode}`);
  return out.join('\n').trim();
}

const step = (what: string) => console.log(`agent-turns: ${what}`);

const box = await runtime.create({
  image: 'busybox:latest',
  network: { mode: 'disabled' },
  // The agent may vanish: after 10 minutes the box is paused, not lost.
  timeoutMs: 10 * 60_000,
  onTimeout: 'pause',
  // A command of the next turn resumes a paused box by itself.
  autoResume: true,
});
try {
  step(`created box ${box.id}`);

  // Turn 1: the agent writes a program and a background worker, and runs the program.
  await box.files.write('/work/count.sh', '#!/bin/sh\nfor i in 1 2 3; do echo "line $i"; done\n');
  await sh(box, 'chmod +x /work/count.sh');
  step(`turn 1 output: ${(await sh(box, '/work/count.sh')).split('\n').join(', ')}`);
  // A worker that outlives the command that started it, writing a heartbeat (the first one at once).
  await sh(
    box,
    'date +%s%N > /work/heartbeat; (while :; do date +%s%N > /work/heartbeat; sleep 0.2; done) </dev/null >/dev/null 2>&1 &',
  );

  // Between turns the box is paused: its processes are frozen and use no CPU.
  await box.pause();
  const beat = await box.files.read('/work/heartbeat');
  await new Promise((resolve) => setTimeout(resolve, 700));
  step(
    `paused: status ${(await box.info()).state.status}, heartbeat frozen ${beat === (await box.files.read('/work/heartbeat'))}`,
  );

  // Turn 2: the next command resumes the box (autoResume); the worker runs on where it stopped.
  const files = await sh(box, 'ls /work');
  step(`turn 2: status ${(await box.info()).state.status}, files ${files.split('\n').join(' ')}`);
  await new Promise((resolve) => setTimeout(resolve, 700));
  step(`worker running again ${beat !== (await box.files.read('/work/heartbeat'))}`);

  // A good turn: the box's files are saved while it keeps running (copy-on-write, milliseconds).
  const saved = await box.snapshot.create('turn-2');
  step(`snapshot ${saved.name} taken, box ${(await box.info()).state.status}`);

  // Turn 3: the agent breaks things.
  await sh(box, 'rm -f /work/count.sh');
  step(`turn 3: broke the program, count.sh exists ${await box.files.exists('/work/count.sh')}`);

  // Back to the good turn: the box restarts on the saved files (same id; its processes start afresh).
  await box.snapshot.restore('turn-2');
  step(
    `restored ${saved.name}: count.sh exists ${await box.files.exists('/work/count.sh')}, output ${(await sh(box, '/work/count.sh')).split('\n').join(', ')}`,
  );

  // The agent asks for more time: the deadline moves (and would pause the box when it passes).
  await box.setTimeout(30 * 60_000);
  step('timeout extended to 30 minutes');

  await box.pause();
  await box.resume();
  step(`explicit pause and resume: status ${(await box.info()).state.status}`);

  // The box travels: an archive (an OCI image layout: image layers, the box's files, its options),
  // imported by a runtime on another homeDir.
  const elsewhere = mkdtempSync(join(tmpdir(), 'agent-turns-elsewhere-'));
  try {
    const archive = join(elsewhere, 'box.tar');
    await box.export(archive);
    step(`exported to an OCI archive of ${(statSync(archive).size / 1e6).toFixed(1)} MB`);
    const other = new JsRuntime({ homeDir: join(elsewhere, 'home') });
    const copy = await other.importBox(archive);
    try {
      step(
        `imported elsewhere: files ${(await sh(copy, 'ls /work')).split('\n').join(' ')}, output ${(await sh(copy, '/work/count.sh')).split('\n').join(', ')}`,
      );
    } finally {
      await other.remove(copy.id, true);
    }
  } finally {
    rmSync(elsewhere, { recursive: true, force: true });
  }
} finally {
  await runtime.remove(box.id, true);
  step('removed');
}
