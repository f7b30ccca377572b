/**
 * The one `Authorization` header parser (RFC 6750 §2.1, RFC 9449 §7.1, RFC 7617 §2): every scheme it
 * reads, every malformed shape it names, and the schemes it leaves to others.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isToken68, parseAuthorization } from '../src/authorization-header.ts';

const b64 = (text: string) => Buffer.from(text, 'utf8').toString('base64');

describe('parseAuthorization', () => {
  it('reads no header, an empty one and one of whitespace as none', () => {
    for (const header of [undefined, '', '   ', []])
      assert.deepEqual(parseAuthorization(header), { kind: 'none' }, JSON.stringify(header));
  });

  it('reads Bearer and DPoP tokens with the scheme in any case, first value of a repeated header', () => {
    assert.deepEqual(parseAuthorization('Bearer abc.DEF-_~+/=='), {
      kind: 'token',
      scheme: 'Bearer',
      token: 'abc.DEF-_~+/==',
    });
    assert.deepEqual(parseAuthorization('  bEaReR \t tok  '), {
      kind: 'token',
      scheme: 'Bearer',
      token: 'tok',
    });
    assert.deepEqual(parseAuthorization('dpop x.y.z'), { kind: 'token', scheme: 'DPoP', token: 'x.y.z' });
    assert.deepEqual(parseAuthorization(['DPoP first', 'Bearer second']), {
      kind: 'token',
      scheme: 'DPoP',
      token: 'first',
    });
  });

  it('names what is wrong with a malformed Bearer or DPoP header', () => {
    const cases: [string, string, string][] = [
      ['Bearer', 'Bearer', 'missing'],
      ['DPoP   ', 'DPoP', 'missing'],
      ['Bearer a b', 'Bearer', 'several'],
      ['DPoP a\tb', 'DPoP', 'several'],
      ['Bearer a=b', 'Bearer', 'charset'],
      ['Bearer tök', 'Bearer', 'charset'],
      ['DPoP "quoted"', 'DPoP', 'charset'],
    ];
    for (const [header, scheme, problem] of cases)
      assert.deepEqual(parseAuthorization(header), { kind: 'malformed', scheme, problem }, header);
  });

  it('decodes Basic credentials at the first colon without further decoding (RFC 7617 §2)', () => {
    assert.deepEqual(parseAuthorization(`Basic ${b64('my%20app:s:e:c')}`), {
      kind: 'basic',
      userId: 'my%20app',
      password: 's:e:c',
    });
    assert.deepEqual(parseAuthorization(`basic ${b64(':only-password')}`), {
      kind: 'basic',
      userId: '',
      password: 'only-password',
    });
    assert.deepEqual(parseAuthorization(`Basic ${b64('é:ü')}`), {
      kind: 'basic',
      userId: 'é',
      password: 'ü',
    });
  });

  it('refuses non-canonical base64 and credentials without a colon in Basic', () => {
    const cases: [string, string][] = [
      ['Basic', 'missing'],
      ['Basic YWJj ZA==', 'several'],
      ['Basic YWJjZA', 'charset'],
      ['Basic YW-j', 'charset'],
      ['Basic YWJjZA===', 'charset'],
      [`Basic ${b64('no-colon')}`, 'no-colon'],
    ];
    for (const [header, problem] of cases)
      assert.deepEqual(parseAuthorization(header), { kind: 'malformed', scheme: 'Basic', problem }, header);
  });

  it('reports other schemes and text that is no scheme at all as other', () => {
    assert.deepEqual(parseAuthorization('Digest username="a"'), { kind: 'other', scheme: 'Digest' });
    assert.deepEqual(parseAuthorization('Bearerx abc'), { kind: 'other', scheme: 'Bearerx' });
    assert.deepEqual(parseAuthorization('Negotiate'), { kind: 'other', scheme: 'Negotiate' });
    assert.deepEqual(parseAuthorization('"Bearer" abc'), { kind: 'other', scheme: '"Bearer" abc' });
  });

  it('reads a long hostile header in one pass', () => {
    const parsed = parseAuthorization(`Bearer ${'a'.repeat(200_000)}!`);
    assert.deepEqual(parsed, { kind: 'malformed', scheme: 'Bearer', problem: 'charset' });
    assert.equal(
      parseAuthorization(`Basic ${' '.repeat(100_000)}x ${'='.repeat(100_000)}`).kind,
      'malformed',
    );
  });

  it('isToken68 accepts the b64token alphabet with trailing padding only', () => {
    assert.equal(isToken68('aZ09-._~+/=='), true);
    assert.equal(isToken68('a=b'), false);
    assert.equal(isToken68(''), false);
  });
});
