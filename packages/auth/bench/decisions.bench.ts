/**
 * Authorization decisions per second: the core's compiled matchers vs node-casbin (RBAC with deny), with the
 * same users, roles and rules, in one run (issue 4 "Decisions must be fast"; goal ≥ 10× Casbin).
 *
 * Data (seeded, deterministic): ROLES roles with 8 rules each (exact codes, `*` and `**` patterns), USERS users
 * with 2 roles, 1 direct grant and, for every third user, 1 deny rule; 300 concrete codes; random
 * (user, code) requests. Casbin gets the same rules as anchored regexes (`regexMatch`) with the effect
 * `some(allow) && !some(deny)`. Both engines are checked to agree on every request of the sample first.
 *
 * Engines measured:
 * - `seed/auth (warm)`: the service's path minus token and store — MatcherCache lookup by subject version,
 *   code normalization, trie evaluation with the per-matcher memo, decision object;
 * - `seed/auth (no memo)`: same, with memoization off (every call walks the tries);
 * - `seed/auth service+SQLite`: `AuthorizationService.authorize` end to end with an in-memory SQLite store
 *   and a no-crypto token verifier (subject load + stamp check + decision per call);
 * - `casbin enforceSync`.
 *
 * Engines run in 3 interleaved rounds (BENCH_SECONDS split between them); each reports its median round.
 *
 * Run: `npm run bench -w @seed/auth` (or `node packages/auth/bench/decisions.bench.ts`). Env: BENCH_USERS,
 * BENCH_ROLES, BENCH_SECONDS (per engine, default 3).
 */
import { newEnforcer, newModelFromString } from 'casbin';
import { AuthorizationService } from '../src/authorization.ts';
import { MatcherCache, tryNormalizePermissionCode } from '../src/permissions.ts';
import { AuthorizationReason, decision } from '../src/reasons.ts';
import { SqliteAuthStore } from '../src/store/sqlite.ts';
import type { TokenVerifier } from '../src/token-verifier.ts';

const USERS = Number(process.env.BENCH_USERS ?? 500);
const ROLES = Number(process.env.BENCH_ROLES ?? 30);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);

function mulberry32(seed: number) {
  return () => {
    seed |= 0;
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const rand = mulberry32(42);
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;

const services = Array.from({ length: 10 }, (_, i) => `svc${i}`);
const resources = Array.from({ length: 10 }, (_, i) => `res${i}`);
const actions = ['read', 'write', 'delete'];
const codes = services.flatMap((s) => resources.flatMap((r) => actions.map((a) => `${s}.${r}.${a}`)));

function randomPattern(): string {
  const kind = rand();
  if (kind < 0.5) return pick(codes);
  if (kind < 0.75) return `${pick(services)}.*.${pick(actions)}`;
  if (kind < 0.9) return `${pick(services)}.${pick(resources)}.*`;
  return `${pick(services)}.**`;
}

interface RoleDef {
  name: string;
  allow: string[];
  deny: string[];
}
interface UserDef {
  name: string;
  roles: string[];
  allow: string[];
  deny: string[];
}
const roles: RoleDef[] = Array.from({ length: ROLES }, (_, i) => ({
  name: `role${i}`,
  allow: Array.from({ length: i % 5 === 0 ? 6 : 8 }, randomPattern),
  deny: i % 5 === 0 ? [randomPattern(), randomPattern()] : [],
}));
const users: UserDef[] = Array.from({ length: USERS }, (_, i) => ({
  name: `user${i}`,
  roles: [pick(roles).name, pick(roles).name],
  allow: [randomPattern()],
  deny: i % 3 === 0 ? [randomPattern()] : [],
}));
const requests = Array.from({ length: 200_000 }, () => ({ user: pick(users), code: pick(codes) }));

// ── seed/auth ──
const roleByName = new Map(roles.map((r) => [r.name, r]));
function rulesOf(user: UserDef) {
  const allow = [...user.allow];
  const deny = [...user.deny];
  for (const name of user.roles) {
    const role = roleByName.get(name)!;
    allow.push(...role.allow);
    deny.push(...role.deny);
  }
  return { allow, deny };
}
function seedEngine(memo: boolean) {
  const cache = new MatcherCache(10_000, memo);
  return (user: UserDef, raw: string) => {
    const matcher = cache.get(user.name, 'v1|stamp|role0:1|role1:1', () => rulesOf(user));
    const code = tryNormalizePermissionCode(raw, { allowWildcards: false });
    if (code === undefined) return decision(AuthorizationReason.InvalidPermissionCode);
    const effect = matcher.evaluate(code);
    return decision(
      effect === 'allow'
        ? AuthorizationReason.Granted
        : effect === 'deny'
          ? AuthorizationReason.DeniedByRule
          : AuthorizationReason.NoMatchingGrant,
    );
  };
}

// ── casbin ──
const MODEL = `
[request_definition]
r = sub, obj

[policy_definition]
p = sub, obj, eft

[role_definition]
g = _, _

[policy_effect]
e = some(where (p.eft == allow)) && !some(where (p.eft == deny))

[matchers]
m = g(r.sub, p.sub) && regexMatch(r.obj, p.obj)
`;
function toRegex(pattern: string): string {
  const parts = pattern.split('.').map((s) => (s === '*' ? '[^.]+' : s === '**' ? '[^.]+(\\.[^.]+)*' : s));
  return `^${parts.join('\\.')}$`;
}
async function casbinEngine() {
  const enforcer = await newEnforcer(newModelFromString(MODEL));
  const policies: string[][] = [];
  for (const role of roles) {
    for (const p of role.allow) policies.push([role.name, toRegex(p), 'allow']);
    for (const p of role.deny) policies.push([role.name, toRegex(p), 'deny']);
  }
  const grouping: string[][] = [];
  for (const user of users) {
    for (const p of user.allow) policies.push([user.name, toRegex(p), 'allow']);
    for (const p of user.deny) policies.push([user.name, toRegex(p), 'deny']);
    for (const role of new Set(user.roles)) grouping.push([user.name, role]);
  }
  await enforcer.addPolicies(policies);
  await enforcer.addGroupingPolicies(grouping);
  return {
    enforce: (user: UserDef, code: string) => enforcer.enforceSync(user.name, code),
    policies: policies.length,
  };
}

// ── service + SQLite ──
async function serviceEngine() {
  const store = new SqliteAuthStore();
  for (const role of roles)
    await store.createRole({ name: role.name, permissions: role.allow, deniedPermissions: role.deny });
  const ids = new Map<string, { id: string; stamp: string }>();
  for (const user of users) {
    const record = await store.createUser({
      userName: user.name,
      roles: [...new Set(user.roles)],
      directPermissions: user.allow,
      deniedPermissions: user.deny,
    });
    ids.set(record.id, { id: record.id, stamp: record.securityStamp });
    ids.set(user.name, { id: record.id, stamp: record.securityStamp });
  }
  // Tokens are the user names; verification is a map lookup so that only the decision path is measured.
  const verifier: TokenVerifier = {
    async verify(token) {
      const found = ids.get(token)!;
      return {
        kind: 'user',
        subject: found.id,
        securityStamp: found.stamp,
        clientId: null,
        scopes: [],
        issuedAt: null,
        expiresAt: 0,
        claims: {},
      };
    },
  };
  const service = new AuthorizationService({ store, tokenVerifier: verifier });
  const request = { method: 'GET', url: '/', headers: {} };
  return (user: UserDef, code: string) =>
    service.authorize({ authorization: `Bearer ${user.name}`, requirement: { permission: code }, request });
}

function measureSync(name: string, fn: (user: UserDef, code: string) => unknown, seconds = SECONDS) {
  let i = 0;
  let sink = 0;
  // warm-up: 20 000 calls or 200 ms, whichever comes first
  const warmEnd = process.hrtime.bigint() + 200_000_000n;
  for (let w = 0; w < 20_000 && (w % 100 !== 0 || process.hrtime.bigint() < warmEnd); w++) {
    const r = requests[w % requests.length]!;
    if (fn(r.user, r.code)) sink++;
  }
  const start = process.hrtime.bigint();
  const deadline = start + BigInt(Math.round(seconds * 1e9));
  let now = start;
  while (now < deadline) {
    for (let k = 0; k < 50; k++) {
      const r = requests[i++ % requests.length]!;
      if (fn(r.user, r.code)) sink++;
    }
    now = process.hrtime.bigint();
  }
  const perSec = i / (Number(now - start) / 1e9);
  return { name, perSec, sink };
}

async function measureAsync(
  name: string,
  fn: (user: UserDef, code: string) => Promise<unknown>,
  seconds = SECONDS,
) {
  let i = 0;
  const start = process.hrtime.bigint();
  const deadline = start + BigInt(Math.round(seconds * 1e9));
  let now = start;
  while (now < deadline) {
    for (let k = 0; k < 200; k++) {
      const r = requests[i++ % requests.length]!;
      await fn(r.user, r.code);
    }
    now = process.hrtime.bigint();
  }
  return { name, perSec: i / (Number(now - start) / 1e9), sink: 0 };
}

const seedWarm = seedEngine(true);
const seedNoMemo = seedEngine(false);
const casbin = await casbinEngine();
const service = await serviceEngine();

// Agreement check on a sample (and over every code of the first users).
let checked = 0;
let granted = 0;
for (const { user, code } of requests.slice(0, 2000)) {
  const ours = seedNoMemo(user, code).isGranted;
  const theirs = casbin.enforce(user, code);
  const viaService = (await service(user, code)).decision.isGranted;
  if (ours !== theirs || ours !== viaService) {
    throw new Error(
      `engines disagree for ${user.name} ${code}: seed=${ours} casbin=${theirs} service=${viaService}`,
    );
  }
  checked++;
  if (ours) granted++;
}

console.log(
  `users=${USERS} roles=${ROLES} rules(casbin policies)=${casbin.policies} codes=${codes.length}; ` +
    `engines agree on ${checked} sampled requests (${granted} granted)`,
);
// Interleaved rounds (load on a shared machine drifts); each engine reports its median round.
const ROUNDS = 3;
const engines: { name: string; run: () => Promise<{ perSec: number }> }[] = [
  {
    name: 'seed/auth compiled matcher (warm, memo)',
    run: async () => measureSync('', seedWarm, SECONDS / ROUNDS),
  },
  {
    name: 'seed/auth compiled matcher (no memo)',
    run: async () => measureSync('', seedNoMemo, SECONDS / ROUNDS),
  },
  { name: 'seed/auth AuthorizationService + SQLite', run: () => measureAsync('', service, SECONDS / ROUNDS) },
  {
    name: 'casbin 5 enforceSync (RBAC with deny)',
    run: async () => measureSync('', casbin.enforce, SECONDS / ROUNDS),
  },
];
const rounds = engines.map(() => [] as number[]);
for (let round = 0; round < ROUNDS; round++) {
  for (const [i, engine] of engines.entries()) rounds[i]!.push((await engine.run()).perSec);
}
const medians = rounds.map((xs) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)]!);
const base = medians.at(-1)!;
for (const [i, engine] of engines.entries()) {
  const perSec = medians[i]!;
  console.log(
    `${engine.name.padEnd(44)} ${Math.round(perSec).toLocaleString('en-US').padStart(14)} decisions/s  ${(perSec / base).toFixed(1).padStart(8)}× casbin`,
  );
}
