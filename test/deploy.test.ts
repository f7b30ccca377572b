/**
 * The deployment files of `deploy/`, checked where no Docker or Kubernetes runs: `compose.yaml` against the
 * Compose specification's schema and rules (dclint), every Kubernetes manifest against the API's schemas
 * (kubernetes-models), and what they say checked against what the servers do (ports, health paths,
 * commands, environment variable names the servers read).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { Deployment } from 'kubernetes-models/apps/v1';
import { Ingress } from 'kubernetes-models/networking.k8s.io/v1';
import { ConfigMap, PersistentVolumeClaim, Secret, Service } from 'kubernetes-models/v1';
import { parse, parseAllDocuments } from 'yaml';

const ROOT = join(import.meta.dirname, '..');
const DEPLOY = join(ROOT, 'deploy');
const DCLINT = join(ROOT, 'node_modules', 'dclint', 'bin', 'dclint.cjs');

/**
 * Runs dclint on a file with the repository's settings (`deploy/dclint.json`: double-quoted ports, as the
 * formatter writes them); `--max-warnings 0` makes a warning fail too.
 */
function dclint(file: string) {
  return spawnSync(
    process.execPath,
    [DCLINT, '-c', join(DEPLOY, 'dclint.json'), '--max-warnings', '0', '--color', 'false', file],
    { encoding: 'utf8' },
  );
}

const MODELS: Record<string, new (data: never) => { validate(): void }> = {
  'apps/v1/Deployment': Deployment,
  'v1/Service': Service,
  'v1/ConfigMap': ConfigMap,
  'v1/PersistentVolumeClaim': PersistentVolumeClaim,
  'v1/Secret': Secret,
  'networking.k8s.io/v1/Ingress': Ingress,
};

interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string };
  // biome-ignore lint/suspicious/noExplicitAny: manifests are checked by their schemas, then read freely
  spec?: any;
}

function manifests(): Manifest[] {
  const dir = join(DEPLOY, 'kubernetes');
  return readdirSync(dir)
    .filter((f) => f.endsWith('.yaml'))
    .flatMap((f) => parseAllDocuments(readFileSync(join(dir, f), 'utf8')).map((d) => d.toJS() as Manifest));
}

/** The environment variable names a server's source reads (`env.X`, `process.env.X`, `'X'` in intFromEnv). */
function variablesRead(...files: string[]): Set<string> {
  const text = files.map((f) => readFileSync(join(ROOT, f), 'utf8')).join('\n');
  return new Set(
    [...text.matchAll(/env\.([A-Z][A-Z0-9_]+)|FromEnv\('([A-Z][A-Z0-9_]+)'/g)].map((m) => m[1] ?? m[2]!),
  );
}

const SERVERS = {
  auth: {
    port: 4100,
    ready: '/readyz',
    vars: variablesRead(
      'packages/auth/src/env-config.ts',
      'packages/auth/src/server.ts',
      'packages/auth/bin/auth-server.ts',
    ),
  },
  creatures: {
    port: 4000,
    ready: '/healthz',
    vars: variablesRead('packages/creatures/bin/creature-server.ts', 'packages/creatures/src/server.ts'),
  },
} as const;

describe('deploy/compose.yaml', () => {
  test('passes the Compose schema and dclint rules without a warning', () => {
    const r = dclint(join(DEPLOY, 'compose.yaml'));
    assert.equal(r.status, 0, r.stdout + r.stderr);
  });

  test('a file that breaks the schema is refused (the check can fail)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'seed-compose-'));
    try {
      const broken = readFileSync(join(DEPLOY, 'compose.yaml'), 'utf8').replace(
        'restart: unless-stopped',
        'restart: 42',
      );
      writeFileSync(join(dir, 'compose.yaml'), broken);
      assert.notEqual(dclint(join(dir, 'compose.yaml')).status, 0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('each server service runs its command, health-checks its own port and sets only variables it reads', () => {
    const compose = parse(readFileSync(join(DEPLOY, 'compose.yaml'), 'utf8'));
    for (const [name, server] of Object.entries(SERVERS)) {
      const service = compose.services[name];
      assert.equal(service.build.args.PACKAGE, name);
      assert.deepEqual(service.command, [name === 'auth' ? 'auth-server' : 'creature-server']);
      assert.match(
        service.healthcheck.test.join(' '),
        new RegExp(`127\\.0\\.0\\.1:${server.port}${server.ready}`),
      );
      for (const variable of Object.keys(service.environment))
        assert.ok(server.vars.has(variable), `${name}: ${variable}`);
      assert.equal(String(service.environment[name === 'auth' ? 'AUTH_PORT' : 'PORT']), String(server.port));
    }
    const caddy = readFileSync(join(DEPLOY, 'Caddyfile'), 'utf8');
    assert.match(caddy, /reverse_proxy creatures:4000|dynamic a creatures 4000/);
    assert.match(caddy, /reverse_proxy auth:4100|dynamic a auth 4100/);
  });
});

describe('deploy/kubernetes', () => {
  test('every manifest validates against its Kubernetes API schema', () => {
    const all = manifests();
    assert.ok(all.length >= 7);
    for (const m of all) {
      const Model = MODELS[`${m.apiVersion}/${m.kind}`];
      assert.ok(Model, `no model for ${m.apiVersion} ${m.kind}`);
      new Model(m as never).validate();
    }
  });

  test('a manifest that breaks the schema is refused (the check can fail)', () => {
    const deployment = manifests().find((m) => m.kind === 'Deployment')!;
    const broken = structuredClone(deployment);
    broken.spec.replicas = 'one';
    assert.throws(() => new Deployment(broken as never).validate());
  });

  test('Deployments probe the health endpoints on their port; Services and the Ingress point at them', () => {
    const all = manifests();
    for (const [name, server] of Object.entries(SERVERS)) {
      const deployment = all.find((m) => m.kind === 'Deployment' && m.metadata.name === `seed-${name}`)!;
      const container = deployment.spec.template.spec.containers[0];
      assert.equal(container.ports[0].containerPort, server.port);
      assert.equal(container.readinessProbe.httpGet.path, server.ready);
      assert.equal(container.livenessProbe.httpGet.path, '/healthz');
      const shared = container.env.some((e: { name: string }) => /DATABASE_URL$/.test(e.name));
      if (shared) {
        // A shared database (PostgreSQL): several replicas, rolling updates.
        assert.ok(deployment.spec.replicas >= 2, `${name}: replicas on a shared database`);
        assert.equal(deployment.spec.strategy.type, 'RollingUpdate');
      } else {
        assert.equal(deployment.spec.strategy.type, 'Recreate', 'one SQLite writer at a time');
      }
      for (const { name: variable } of container.env)
        assert.ok(server.vars.has(variable), `${name}: ${variable}`);
      const service = all.find((m) => m.kind === 'Service' && m.metadata.name === `seed-${name}`)!;
      assert.equal(service.spec.ports[0].port, server.port);
      assert.deepEqual(service.spec.selector, deployment.spec.selector.matchLabels);
    }
    const ingress = all.find((m) => m.kind === 'Ingress')!;
    const backends = ingress.spec.rules.map(
      (r: { http: { paths: { backend: { service: { name: string } } }[] } }) =>
        r.http.paths[0]!.backend.service.name,
    );
    assert.deepEqual(backends.sort(), ['seed-auth', 'seed-creatures']);
  });
});
