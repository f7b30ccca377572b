/**
 * The root README as a newcomer follows it: a fresh clone of the repository's HEAD (its `node_modules`, the
 * root's and the workspaces', are the set-up commands' result, linked in from this checkout so no registry
 * is asked), then every shell
 * block of the README's product sections run line by line in that clone, and the TypeScript example saved
 * as `example.ts` and run as its comment says. A line that starts a server (`npm run start:…`) runs in the
 * background until the port of the README's table answers; every other line runs to completion, and the
 * `# …` lines under it are its expected output, with `…` standing for any text and `<…>` for a value the
 * README cannot know (a token, a box id). `<access_token>` in a later line is the token of an earlier answer.
 *
 * The sandbox part needs root and the local registry of `npm run test:setup` on 127.0.0.1:5000; without
 * them it is skipped with the reason.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

const ROOT = join(import.meta.dirname, '..');
const README = readFileSync(join(ROOT, 'README.md'), 'utf8');
/** Default ports of the README's table, by the script that starts each server. */
const PORTS: Record<string, number> = { 'start:creatures': 4000, 'start:auth': 4100, 'start:sandbox': 8100 };

/** One fenced block of the README: its language, its lines, and the section heading above it. */
interface Block {
  lang: string;
  lines: string[];
  section: string;
}

/** The fenced code blocks of a Markdown text, each with the `##` heading it stands under. */
function blocks(markdown: string): Block[] {
  const out: Block[] = [];
  let section = '';
  let open: Block | null = null;
  for (const line of markdown.split('\n')) {
    if (open) {
      if (line.startsWith('```')) {
        out.push(open);
        open = null;
      } else open.lines.push(line);
    } else if (line.startsWith('## ')) section = line.slice(3);
    else if (line.startsWith('```')) open = { lang: line.slice(3).trim(), lines: [], section };
  }
  return out;
}

/** A shell command of a block and the output lines the README shows under it. */
interface Step {
  command: string;
  expected: string[];
}

/** Splits a shell block into commands (joining `\` continuations) with the `# ` lines that follow each. */
function steps(lines: string[]): Step[] {
  const out: Step[] = [];
  let pending = '';
  for (const line of lines) {
    if (line.startsWith('# ') && !pending) {
      out.at(-1)?.expected.push(line.slice(2));
      continue;
    }
    const text = line.replace(/\s+#.*$/, '');
    if (text.endsWith('\\')) {
      pending += `${text.slice(0, -1)} `;
      continue;
    }
    const command = (pending + text).trim();
    pending = '';
    if (command) out.push({ command, expected: [] });
  }
  return out;
}

/** A pattern for one expected line: `…` is any text, `<…>` any value, the rest literal. */
function pattern(expected: string): RegExp {
  const parts = expected.split(/(…|<[^>]+>)/);
  const source = parts
    .map((part) =>
      part === '…' || /^<[^>]+>$/.test(part) ? '.*?' : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'),
    )
    .join('');
  return new RegExp(`^${source}$`, 's');
}

/** Resolves once something listens on 127.0.0.1:`port`; rejects after `tries` attempts 200 ms apart. */
async function listening(port: number, server: ChildProcess, tries = 300): Promise<void> {
  for (let i = 0; i < tries; i++) {
    if (server.exitCode !== null)
      throw new Error(`the server exited with ${server.exitCode} before port ${port} answered`);
    const up = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (up) return;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`nothing listens on port ${port}`);
}

/** Whether the sandbox part can run here: root, and the local registry of the test set-up answering. */
async function sandboxReady(): Promise<string | null> {
  if (process.getuid?.() !== 0) return 'the sandbox needs root';
  try {
    const res = await fetch('http://127.0.0.1:5000/v2/');
    return res.ok ? null : `the local registry answered ${res.status}`;
  } catch {
    return 'the local registry (npm run sandbox:registry) is not running';
  }
}

let clone = '';
const servers: ChildProcess[] = [];
/** The environment of a newcomer's shell: this one's, without what `npm test` sets for its own run. */
const SHELL_ENV: NodeJS.ProcessEnv = Object.fromEntries(
  Object.entries(process.env).filter(([key]) => !key.startsWith('npm_') && key !== 'NODE_OPTIONS'),
);

before(() => {
  const work = mkdtempSync(join(tmpdir(), 'seed-readme-'));
  clone = join(work, 'seed');
  const cloned = spawnSync('git', ['clone', '--quiet', ROOT, clone], { encoding: 'utf8' });
  assert.equal(cloned.status, 0, cloned.stderr);
  // The set-up commands' npm install, as hard links (the workspace links inside are relative, so they
  // resolve to the clone's packages); the lock copy is made as new as the lock so `npm start` installs nothing.
  // npm puts a dependency a workspace needs in another version than the root's under the workspace itself.
  const installed = [
    'node_modules',
    ...readdirSync(join(ROOT, 'packages')).map((p) => join('packages', p, 'node_modules')),
  ];
  for (const dir of installed.filter((d) => existsSync(join(ROOT, d)))) {
    const linked = spawnSync('cp', ['-al', join(ROOT, dir), join(clone, dir)]);
    assert.equal(linked.status, 0, String(linked.stderr));
  }
  spawnSync('touch', [
    '-r',
    join(clone, 'node_modules', '.package-lock.json'),
    join(clone, 'package-lock.json'),
  ]);
});

after(() => {
  for (const server of servers) {
    if (server.pid && server.exitCode === null) {
      try {
        process.kill(-server.pid, 'SIGTERM');
      } catch {}
    }
  }
  if (clone) rmSync(join(clone, '..'), { recursive: true, force: true });
});

/** Runs the steps of one shell block in the clone, checking each expected output. */
async function runBlock(block: Block): Promise<void> {
  let token = '';
  for (const step of steps(block.lines)) {
    const command = step.command.replaceAll('<access_token>', token);
    const script = /npm run (start:[a-z]+)/.exec(command)?.[1];
    if (script) {
      const server = spawn('sh', ['-c', command], {
        cwd: clone,
        env: SHELL_ENV,
        detached: true,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      servers.push(server);
      let said = '';
      const keep = (chunk: Buffer) => {
        said = (said + chunk.toString('utf8')).slice(-4096);
      };
      server.stdout!.on('data', keep);
      server.stderr!.on('data', keep);
      await listening(PORTS[script]!, server).catch((error: Error) => {
        throw new Error(`${error.message}; the server printed:\n${said}`);
      });
      continue;
    }
    const ran = spawnSync('sh', ['-c', command], {
      cwd: clone,
      env: SHELL_ENV,
      encoding: 'utf8',
      timeout: 300_000,
    });
    assert.equal(ran.status, 0, `\`${command}\` exited ${ran.status}: ${ran.stderr}`);
    const output = ran.stdout.trimEnd();
    const answer = /"access_token":"([^"]+)"/.exec(output)?.[1];
    if (answer) token = answer;
    if (step.expected.length > 0) {
      assert.match(output, pattern(step.expected.join('\n')), `output of \`${command}\``);
    } else {
      assert.notEqual(output, '', `\`${command}\` printed something`);
    }
  }
}

describe('root README, from a fresh clone', () => {
  const all = blocks(README);

  test('the creature server section: start it, then the query answers what the README shows', async () => {
    const block = all.find((b) => b.lang === 'sh' && b.section.startsWith('Creature server'));
    assert.ok(block, 'the section has a shell block');
    await runBlock(block);
  });

  test('the authorization service section: start it, get a token, list the users with it', async () => {
    const block = all.find((b) => b.lang === 'sh' && b.section.startsWith('Authorization service'));
    assert.ok(block, 'the section has a shell block');
    await runBlock(block);
  });

  test('the sandbox section: example.ts prints what its comments say, and the command line runs a box', async (t) => {
    const skip = await sandboxReady();
    if (skip) {
      t.skip(skip);
      return;
    }
    const sandbox = all.filter((b) => b.section.startsWith('Sandbox SDK'));
    const example = sandbox.find((b) => b.lang === 'ts');
    assert.ok(example, 'the section has a TypeScript example');
    writeFileSync(join(clone, 'example.ts'), `${example.lines.join('\n')}\n`);
    const how = /run with: (\S+) (.*?) ?example\.ts/.exec(example.lines.join('\n'));
    assert.ok(how, 'the example says how to run it');
    const ran = spawnSync(how[1]!, [...how[2]!.split(' ').filter(Boolean), 'example.ts'], {
      cwd: clone,
      env: SHELL_ENV,
      encoding: 'utf8',
      timeout: 300_000,
    });
    assert.equal(ran.status, 0, ran.stderr);
    const printed = ran.stdout.trimEnd().split('\n');
    const expected = example.lines
      .filter((line) => /console\.(log|dir)\(/.test(line))
      .map((line) => /\/\/\s*(.+)$/.exec(line)?.[1]?.trim() ?? '');
    assert.equal(printed.length, expected.length, `lines printed: ${ran.stdout}`);
    for (const [i, line] of expected.entries()) {
      assert.match(printed[i]!, pattern(line), `console line ${i + 1}`);
    }
    const shell = sandbox.find((b) => b.lang === 'sh');
    assert.ok(shell, 'the section has a shell block');
    await runBlock(shell);
  });
});
