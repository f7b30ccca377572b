/**
 * The three packages as a user gets them: `npm pack` of each workspace (its `prepack` builds `dist/`),
 * the tarballs installed into a scratch project outside the repository, then, under Node 22 and Node 24:
 * the public API imported by package name, each package README's first example (the sandbox's through the
 * installed `sandbox serve`, when this process may run boxes), every bin's `--help` and `--version`; an older Node gets one clear line from
 * every bin; a consumer file type-checks against the shipped `.d.ts`; `npm publish --dry-run` is clean.
 *
 * Node 22 comes from the registry's `node-<platform>-<arch>@22` package (the binary package behind the
 * `node@22` npm package), installed into the scratch directory; Node 24 is the repository's own.
 */
import assert from 'node:assert/strict';
import { type SpawnSyncReturns, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

const ROOT = join(import.meta.dirname, '..');
const PACKAGES = ['sandbox', 'auth', 'creatures'] as const;
const BINS = { sandbox: 'sandbox', auth: 'auth-server', creatures: 'creature-server' } as const;
const VERSIONS = Object.fromEntries(
  PACKAGES.map((p) => [
    p,
    JSON.parse(readFileSync(join(ROOT, 'packages', p, 'package.json'), 'utf8')).version,
  ]),
) as Record<(typeof PACKAGES)[number], string>;
/**
 * The environment of the npm and node commands run here: no update check, no inherited NODE_OPTIONS, and
 * npm's default log level (under `npm run --silent`, as `npm test` runs, `npm_config_loglevel=silent` is
 * inherited and npm would print none of the report lines read here).
 */
const NPM_ENV = {
  ...process.env,
  npm_config_update_notifier: 'false',
  npm_config_loglevel: 'notice',
  NODE_OPTIONS: '',
};

let work = '';
let app = '';
let node22 = '';

function run(cmd: string, args: string[], cwd: string, env = NPM_ENV): SpawnSyncReturns<string> {
  return spawnSync(cmd, args, { cwd, env, encoding: 'utf8', timeout: 300_000 });
}

/** Like {@link run}, without blocking the event loop (for commands that talk to a server of this process). */
async function runAsync(
  cmd: string,
  args: string[],
  cwd: string,
  env: NodeJS.ProcessEnv,
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  const child = spawn(cmd, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => {
    stdout += d;
  });
  child.stderr.on('data', (d) => {
    stderr += d;
  });
  const [status] = (await once(child, 'close')) as [number | null];
  return { status, stdout, stderr };
}

function ok(r: SpawnSyncReturns<string>, what: string): string {
  assert.equal(r.status, 0, `${what} failed (${r.status}):\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

before(() => {
  work = mkdtempSync(join(tmpdir(), 'seed-packaging-'));
  const packs = join(work, 'packs');
  mkdirSync(packs);
  const packOutput = ok(
    run(
      'npm',
      ['pack', '--json', '--pack-destination', packs, ...PACKAGES.flatMap((p) => ['-w', `@seed/${p}`])],
      ROOT,
    ),
    'npm pack',
  );
  // The build steps of `prepack` may print first; npm's JSON report is the array that closes the output.
  const packed = JSON.parse(packOutput.slice(packOutput.search(/^\[\s*\{/m))) as {
    filename: string;
    files: { path: string }[];
  }[];
  for (const p of packed) {
    const paths = p.files.map((f) => f.path);
    assert.ok(!paths.some((f) => /(^|\/)(test|bench|src)\//.test(f) && !f.startsWith('dist/')), p.filename);
  }

  app = join(work, 'app');
  mkdirSync(app);
  writeFileSync(
    join(app, 'package.json'),
    JSON.stringify({ name: 'scratch', private: true, type: 'module' }),
  );
  const install = ['install', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'];
  ok(
    run(
      'npm',
      [
        ...install,
        ...packed.map((p) => join(packs, p.filename)),
        `typescript@${JSON.parse(readFileSync(join(ROOT, 'node_modules/typescript/package.json'), 'utf8')).version}`,
        `@types/node@${JSON.parse(readFileSync(join(ROOT, 'node_modules/@types/node/package.json'), 'utf8')).version}`,
      ],
      app,
    ),
    'npm install of the tarballs',
  );
  const nodeDir = join(work, 'node22');
  mkdirSync(nodeDir);
  writeFileSync(join(nodeDir, 'package.json'), JSON.stringify({ name: 'node22', private: true }));
  const binaryPackage = `node-${process.platform}-${process.arch}`;
  ok(run('npm', [...install, `${binaryPackage}@22`], nodeDir), `npm install ${binaryPackage}@22`);
  node22 = join(nodeDir, 'node_modules', binaryPackage, 'bin', 'node');
});

after(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

const EXAMPLE_IMPORTS = `
import * as sandbox from '@seed/sandbox';
import * as auth from '@seed/auth';
import * as creatures from '@seed/creatures';
const names = {
  sandbox: ['JsRuntime', 'SimpleBox', 'CodeBox', 'BrowserBox', 'ComputerBox', 'InteractiveBox', 'BoxError', 'ExecError', 'TimeoutError', 'ParseError'],
  auth: ['buildAuthServer', 'SqliteAuthStore', 'AuthorizationService', 'CredentialValidator', 'authPlugin', 'createAuthMiddleware'],
  creatures: ['createServer'],
};
const missing = Object.entries(names).flatMap(([pkg, list]) => list.filter((n) => typeof { sandbox, auth, creatures }[pkg][n] !== 'function').map((n) => pkg + '.' + n));
console.log(JSON.stringify({ missing, node: process.versions.node }));
`;

/**
 * The first example of a package's README: the ```js block after the `<!-- packaging-test: example -->`
 * marker, run as the README tells a user to run it.
 */
function readmeExample(pkg: (typeof PACKAGES)[number]): string {
  const readme = readFileSync(join(ROOT, 'packages', pkg, 'README.md'), 'utf8');
  const found = /<!-- packaging-test: example -->\s*```js\n([\s\S]*?)```/.exec(readme);
  assert.ok(found, `packages/${pkg}/README.md has no marked example`);
  return found[1]!;
}

/** True when this process may run boxes (root) and the local registry of offline images answers. */
async function canRunBoxes(): Promise<boolean> {
  if (process.getuid?.() !== 0) return false;
  return fetch('http://127.0.0.1:5000/v2/').then(
    (r) => r.ok,
    () => false,
  );
}

for (const [label, nodePath] of [
  ['Node 22', () => node22],
  ['Node 24', () => process.execPath],
] as const) {
  describe(`installed packages under ${label}`, () => {
    test('the public API of each package imports by package name', () => {
      writeFileSync(join(app, 'imports.mjs'), EXAMPLE_IMPORTS);
      const out = JSON.parse(ok(run(nodePath(), ['imports.mjs'], app), 'imports.mjs'));
      assert.deepEqual(out.missing, []);
      assert.equal(out.node.split('.')[0], label === 'Node 22' ? '22' : '24');
    });

    test("@seed/creatures README's first example runs: a creature query", () => {
      writeFileSync(join(app, 'creatures-example.mjs'), readmeExample('creatures'));
      const out = ok(run(nodePath(), ['creatures-example.mjs'], app), 'creatures README example');
      assert.deepEqual(JSON.parse(out), {
        data: {
          creature: { weight: { minimum: '5.25kg', maximum: '6.75kg' }, evolutions: [{ name: 'Raichu' }] },
        },
      });
    });

    test("@seed/auth README's first example runs: an OAuth 2.0 password grant", () => {
      writeFileSync(join(app, 'auth-example.mjs'), readmeExample('auth'));
      const out = ok(run(nodePath(), ['auth-example.mjs'], app), 'auth README example');
      assert.equal(out, '200 Bearer 600\n');
    });

    test("@seed/sandbox README's first example runs through the installed REST runtime", async (t) => {
      if (!(await canRunBoxes())) {
        t.skip('needs root and the local registry (npm run sandbox:registry)');
        return;
      }
      // The example uses the default runtime; SANDBOX_URL points it at the `sandbox serve` of the installed
      // package, which resolves `busybox:latest` through the local registry instead of Docker Hub.
      writeFileSync(join(app, 'sandbox-example.mjs'), readmeExample('sandbox'));
      const home = join(work, `sandbox-home-${label.replace(' ', '')}`);
      const port = 18_100 + (label === 'Node 22' ? 22 : 24);
      const server = spawn(
        nodePath(),
        [
          join(app, 'node_modules', '.bin', 'sandbox'),
          '--home',
          home,
          '--registry',
          'http://127.0.0.1:5000',
          'serve',
          '--port',
          String(port),
        ],
        { cwd: app, stdio: ['ignore', 'ignore', 'pipe'], env: NPM_ENV },
      );
      try {
        const url = `http://127.0.0.1:${port}`;
        for (
          let i = 0;
          i < 300 &&
          !(await fetch(`${url}/v1/openapi.json`).then(
            (r) => r.ok,
            () => false,
          ));
          i++
        )
          await new Promise((resolve) => setTimeout(resolve, 100));
        const r = await runAsync(nodePath(), ['sandbox-example.mjs'], app, { ...NPM_ENV, SANDBOX_URL: url });
        assert.equal(r.status, 0, r.stderr);
        assert.match(r.stdout, /exitCode: 0/);
        assert.match(r.stdout, /stdout: 'hello from a box\\n'/);
      } finally {
        server.kill('SIGTERM');
        await once(server, 'exit');
      }
    });
    for (const pkg of PACKAGES) {
      const bin = BINS[pkg];
      test(`${bin} --help and --version`, () => {
        const binPath = join(app, 'node_modules', '.bin', bin);
        const help = ok(run(nodePath(), [binPath, '--help'], app), `${bin} --help`);
        assert.match(help, new RegExp(`Usage: ${bin} `));
        const version = ok(run(nodePath(), [binPath, '--version'], app), `${bin} --version`);
        assert.equal(version.trim(), VERSIONS[pkg]);
      });
    }
  });
}

test('every bin on an older Node prints one line naming the required version', (t) => {
  const old = spawnSync('/usr/bin/node', ['-p', 'process.versions.node'], { encoding: 'utf8' });
  if (old.status !== 0 || Number(old.stdout.split('.')[0]) >= 22) {
    t.skip('no Node.js older than 22 at /usr/bin/node on this machine');
    return;
  }
  for (const bin of Object.values(BINS)) {
    const r = run('/usr/bin/node', [join(app, 'node_modules', '.bin', bin), '--version'], app);
    assert.equal(r.status, 1, bin);
    assert.equal(r.stdout, '', bin);
    assert.equal(
      r.stderr,
      `${bin}: Node.js 22 or later is required; this is Node.js ${old.stdout.trim()}.\n`,
    );
  }
});

test('a consumer type-checks against the shipped declarations', () => {
  writeFileSync(
    join(app, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        target: 'es2022',
        module: 'nodenext',
        moduleResolution: 'nodenext',
        strict: true,
        noEmit: true,
        types: ['node'],
        skipLibCheck: false,
      },
      files: ['consumer.ts'],
    }),
  );
  writeFileSync(
    join(app, 'consumer.ts'),
    `import { JsRuntime, SimpleBox, BoxError, type JsBoxOptions, type JsBoxInfo, type ExecResult } from '@seed/sandbox';
import { buildAuthServer, AuthorizationReason } from '@seed/auth';
import { createServer, type CreatureServer } from '@seed/creatures';

const options: JsBoxOptions = { image: 'busybox:latest', memoryMib: 256, network: { mode: 'disabled' } };
export async function use(runtime: JsRuntime): Promise<[string, ExecResult]> {
  const box = await runtime.create(options, 'name');
  const info: JsBoxInfo = await box.info();
  await using simple = new SimpleBox({ runtime, image: 'busybox:latest' });
  return [info.id, await simple.exec('echo', 'hi')];
}
export const isBoxError = (e: unknown): e is BoxError => e instanceof BoxError;
// @ts-expect-error memoryMib is a number of MiB
export const wrong: JsBoxOptions = { image: 'busybox:latest', memoryMib: '512' };
export const server: CreatureServer = createServer({ databasePath: ':memory:' });
export const granted: number = AuthorizationReason.Granted;
export const auth = buildAuthServer;
`,
  );
  const tsc = join(app, 'node_modules', 'typescript', 'bin', 'tsc');
  ok(run(process.execPath, [tsc, '-p', 'tsconfig.json'], app), 'tsc of the consumer');
});

test('npm publish --dry-run is clean for every package', () => {
  for (const pkg of PACKAGES) {
    const r = run('npm', ['publish', '--dry-run', '--ignore-scripts', '-w', `@seed/${pkg}`], ROOT);
    ok(r, `npm publish --dry-run -w @seed/${pkg}`);
    const warnings = r.stderr
      .split('\n')
      .filter((l) => l.startsWith('npm warn'))
      // About this machine, not the package: its npmrc, and no registry login for a dry run.
      .filter(
        (l) => !/Unknown (user|env|global|project) config "nodedir"|requires you to be logged in/.test(l),
      );
    assert.deepEqual(warnings, [], `@seed/${pkg}`);
    assert.match(r.stdout, new RegExp(`\\+ @seed/${pkg}@${VERSIONS[pkg].replaceAll('.', '\\.')}`));
  }
});
