/**
 * Credential validation (spec 001 "Credential validation", lockout states and limits, audit events): failure
 * codes, lockout and its expiry with an injected clock, the concurrent lockout race, the dummy hash for unknown
 * users, rehash on login.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { CredentialValidator } from '../src/credentials.ts';
import { PasswordHasher } from '../src/passwords.ts';
import { SqliteAuthStore } from '../src/store/sqlite.ts';
import { ManualClock, testHasher } from './helpers.ts';

/** A hasher that counts verifications, split by whether the real user's hash was checked. */
class CountingHasher extends PasswordHasher {
  verified: string[] = [];
  override async verify(password: string, encoded: string): Promise<boolean> {
    this.verified.push(encoded);
    return super.verify(password, encoded);
  }
}

async function setup(options: { max?: number; lockoutMs?: number; hasher?: PasswordHasher } = {}) {
  const clock = new ManualClock();
  const store = new SqliteAuthStore({ now: clock.now });
  const hasher = options.hasher ?? testHasher();
  const validator = new CredentialValidator({
    store,
    hasher,
    now: clock.now,
    maxAccessFailedCount: options.max,
    lockoutDurationMs: options.lockoutMs,
  });
  const user = await store.createUser({
    userName: 'Alice',
    passwordHash: await hasher.hash('correct horse'),
  });
  return { clock, store, hasher, validator, user };
}

describe('credential validation', () => {
  test('success returns the user and writes a Login/Success audit event', async () => {
    const { store, validator, user } = await setup();
    const result = await validator.validate('alice', 'correct horse', {
      clientId: 'web',
      remoteAddress: '10.0.0.1',
    });
    assert.ok(result.ok);
    assert.equal(result.user.id, user.id);
    const { items } = await store.listAudit();
    assert.equal(items.length, 1);
    assert.deepEqual(
      { ...items[0], id: 0, time: 0 },
      {
        id: 0,
        time: 0,
        category: 'Login',
        outcome: 'Success',
        subjectId: user.id,
        subjectName: 'alice',
        clientId: 'web',
        failureCode: null,
        remoteAddress: '10.0.0.1',
        details: null,
      },
    );
  });

  test('unknown user and wrong password both give invalid_credentials; each writes Login/Denied with the code', async () => {
    const { store, validator, user } = await setup();
    assert.deepEqual(await validator.validate('nobody', 'correct horse'), {
      ok: false,
      error: 'invalid_credentials',
    });
    assert.deepEqual(await validator.validate('alice', 'wrong'), { ok: false, error: 'invalid_credentials' });
    assert.deepEqual(await validator.validate(undefined, 42), { ok: false, error: 'invalid_credentials' });
    const { items } = await store.listAudit({ category: 'Login', outcome: 'Denied' });
    assert.equal(items.length, 3);
    assert.ok(items.every((e) => e.failureCode === 'invalid_credentials'));
    assert.deepEqual(items.map((e) => e.subjectId).sort(), [null, null, user.id].sort());
  });

  test('disabled account gives account_disabled, even with the right password', async () => {
    const { store, validator, user } = await setup();
    await store.updateUser(user.id, { isEnabled: false });
    assert.deepEqual(await validator.validate('alice', 'correct horse'), {
      ok: false,
      error: 'account_disabled',
    });
    assert.equal((await store.listAudit()).items[0]?.failureCode, 'account_disabled');
  });

  test('MaxAccessFailedCount (5) consecutive failures lock for LockoutDuration (5 min), then the lock expires', async () => {
    const { clock, store, validator, user } = await setup();
    assert.equal(validator.maxAccessFailedCount, 5);
    assert.equal(validator.lockoutDurationMs, 300_000);
    for (let i = 0; i < 5; i++) assert.equal((await validator.validate('alice', `guess ${i}`)).ok, false);
    const locked = (await store.getUser(user.id))!;
    assert.equal(locked.lockoutEnd, clock.now() + 300_000);
    assert.notEqual(locked.securityStamp, user.securityStamp, 'a lock rotates the security stamp');
    const fifth = (await store.listAudit({ outcome: 'Denied' })).items[0]!;
    assert.equal(fifth.category, 'Login');
    assert.equal(fifth.details?.lockedOut, true);

    // the right password is refused while locked
    assert.deepEqual(await validator.validate('alice', 'correct horse'), { ok: false, error: 'locked_out' });
    clock.advance(299_999);
    assert.deepEqual(await validator.validate('alice', 'correct horse'), { ok: false, error: 'locked_out' });
    clock.advance(1);
    assert.equal((await validator.validate('alice', 'correct horse')).ok, true, 'lock expired');
    assert.equal((await store.getUser(user.id))!.accessFailedCount, 0);
  });

  test('failures must be consecutive: a success resets the count; limits are configurable', async () => {
    const { clock, validator } = await setup({ max: 3, lockoutMs: 1000 });
    await validator.validate('alice', 'x');
    await validator.validate('alice', 'x');
    assert.ok((await validator.validate('alice', 'correct horse')).ok);
    await validator.validate('alice', 'x');
    await validator.validate('alice', 'x');
    assert.ok((await validator.validate('alice', 'correct horse')).ok, 'count was reset by the success');
    for (let i = 0; i < 3; i++) await validator.validate('alice', 'x');
    assert.deepEqual(await validator.validate('alice', 'correct horse'), { ok: false, error: 'locked_out' });
    clock.advance(1000);
    assert.ok((await validator.validate('alice', 'correct horse')).ok);
  });

  test('concurrent attempts cannot check a sixth guess: at most 5 real password checks, then locked_out', async () => {
    const hasher = new CountingHasher({ params: { ln: 10, r: 8, p: 1 } });
    const { validator, user } = await setup({ hasher });
    hasher.verified = [];
    // 40 concurrent attempts; the right password is tried in every other one
    const results = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        validator.validate('alice', i % 2 === 0 ? `guess ${i}` : 'correct horse'),
      ),
    );
    const realChecks = hasher.verified.filter((h) => h === user.passwordHash).length;
    assert.ok(realChecks <= 5, `${realChecks} real password checks`);
    const notLocked = results.filter((r) => r.ok || r.error !== 'locked_out').length;
    assert.ok(notLocked <= 5, `${notLocked} attempts were judged on the password`);
    assert.equal(hasher.verified.length, 40, 'every attempt costs one hash check (dummy when locked)');

    // all-wrong burst: exactly 5 judged, the account ends locked
    const second = await setup();
    const burst = await Promise.all(
      Array.from({ length: 30 }, (_, i) => second.validator.validate('alice', `g${i}`)),
    );
    assert.equal(burst.filter((r) => !r.ok && r.error === 'invalid_credentials').length, 5);
    assert.equal(burst.filter((r) => !r.ok && r.error === 'locked_out').length, 25);
    assert.ok((await second.store.getUser(second.user.id))!.lockoutEnd! > second.clock.now());
    assert.equal((await second.store.listAudit({ limit: 100 })).total, 30, 'one audit event per validation');
  });

  test('unknown users cost one hash check with the same parameters as real users (dummy hash)', async () => {
    const hasher = new CountingHasher({ params: { ln: 11, r: 8, p: 1 } });
    const { validator, user } = await setup({ hasher });
    hasher.verified = [];
    await validator.validate('nobody', 'whatever');
    await validator.validate('alice', 'wrong');
    assert.equal(hasher.verified.length, 2);
    const params = (h: string) => h.split('$')[2];
    assert.equal(params(hasher.verified[0]!), params(user.passwordHash!));
    assert.notEqual(hasher.verified[0], user.passwordHash);
  });

  test('a hash made with outdated parameters is upgraded on successful login, without changing the stamp', async () => {
    const oldHasher = new PasswordHasher({ params: { ln: 10, r: 8, p: 1 } });
    const { store, user } = await setup({ hasher: oldHasher });
    const newHasher = new PasswordHasher({ params: { ln: 11, r: 8, p: 1 } });
    const validator = new CredentialValidator({ store, hasher: newHasher });
    assert.ok(newHasher.needsRehash(user.passwordHash!));
    const result = await validator.validate('alice', 'correct horse');
    assert.ok(result.ok);
    assert.match(result.user.passwordHash!, /^\$scrypt\$ln=11,r=8,p=1\$/);
    assert.equal(result.user.securityStamp, user.securityStamp);
    assert.ok((await validator.validate('alice', 'correct horse')).ok);
  });
});

describe('password hashing', () => {
  test('PHC-encoded scrypt with OWASP defaults; verify is constant-shape and never throws on bad input', async () => {
    const owasp = new PasswordHasher();
    assert.deepEqual({ ...owasp.params }, { ln: 17, r: 8, p: 1 });
    const hasher = testHasher();
    const hash = await hasher.hash('s3cret-pass');
    assert.match(hash, /^\$scrypt\$ln=10,r=8,p=1\$[A-Za-z0-9+/]{22}\$[A-Za-z0-9+/]{43}$/);
    assert.notEqual(await hasher.hash('s3cret-pass'), hash, 'salted');
    assert.equal(await hasher.verify('s3cret-pass', hash), true);
    assert.equal(await hasher.verify('s3cret-pasS', hash), false);
    assert.equal(await hasher.verify('x', 'not a hash'), false);
    assert.equal(await hasher.verify('x', '$scrypt$ln=40,r=8,p=1$AAAA$AAAA'), false);
    assert.equal(owasp.needsRehash(hash), true);
    assert.equal(hasher.needsRehash(hash), false);
    await assert.rejects(hasher.hash('short'), {
      name: 'ValidationError',
      field: 'password',
      rule: 'min_length',
    });
  });
});
