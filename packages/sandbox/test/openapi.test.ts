/**
 * The REST runtime's OpenAPI document, generated from the route schemas: every registered route is in it
 * with its method, path and query parameters, security and error answers (and nothing else is); it is a
 * valid OpenAPI 3.1 document for an independent validator; the answers of a live server match the
 * documented response schemas; and requests are validated by the same schemas (400 naming the field).
 * The server runs without the E2B-compatible API: it speaks E2B's own protocol, which E2B's API document
 * describes (its tests are e2b-*.test.ts), and is left out of this one.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import SwaggerParser from '@apidevtools/swagger-parser';
import { Ajv } from 'ajv';
// internal: the full wire-code table the OpenAPI Error schema enumerates
import { ERROR_CODES } from '../src/errors.ts';
import { JsRuntime } from '../src/index.ts';
import { openApiDocument, type RestServer, startRestServer } from '../src/rest/server.ts';
import { BUSYBOX, cleanupAll, ensureRegistry, tempHome, testRuntime } from './runtime-helpers.ts';

interface Parameter {
  name: string;
  in: string;
  required?: boolean;
}
interface Operation {
  summary?: string;
  tags?: string[];
  parameters?: Parameter[];
  security?: Record<string, string[]>[];
  requestBody?: { content: Record<string, unknown> };
  responses: Record<string, { description?: string; content?: Record<string, { schema: unknown }> }>;
}
interface Document {
  openapi: string;
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, Record<string, unknown>> };
}

const METHODS = ['get', 'put', 'post', 'delete', 'patch'];

let server: RestServer;
let doc: Document;

before(async () => {
  ensureRegistry();
  server = await startRestServer({
    runtime: testRuntime(tempHome('sandbox-openapi-')),
    port: 0,
    logger: { level: 'error' },
    e2b: false,
  });
  doc = (await (await fetch(`${server.url}/v1/openapi.json`)).json()) as Document;
});

after(async () => {
  await server?.close();
  await cleanupAll();
});

/** `/v1/boxes/:box` → `/v1/boxes/{box}`. */
const openApiPath = (url: string) => url.replace(/:(\w+)/g, '{$1}');

describe('OpenAPI document', () => {
  it('lists every registered route with its method, parameters, security and error answers', () => {
    const routes = server.routes.filter((r) => r.method !== 'HEAD');
    assert.ok(routes.length >= 35, `${routes.length} routes`);
    for (const { method, url } of routes) {
      const op = doc.paths[openApiPath(url)]?.[method.toLowerCase()];
      assert.ok(op, `${method} ${url} is documented`);
      assert.ok(op.summary && op.tags?.length, `${method} ${url} has a summary and tags`);
      const pathParams = [...url.matchAll(/:(\w+)/g)].map((m) => m[1]);
      for (const name of pathParams) {
        assert.ok(
          op.parameters?.some((p) => p.in === 'path' && p.name === name && p.required),
          `${method} ${url} documents path parameter ${name}`,
        );
      }
      for (const status of ['400', '500']) assert.ok(op.responses[status], `${method} ${url} ${status}`);
      const isPublic = url === '/v1/openapi.json';
      // A key or token goes in `Authorization: Bearer` or in `X-API-KEY`: two alternatives, one permission.
      assert.deepEqual(op.security?.length, isPublic ? 0 : 2, `${method} ${url} security`);
      if (!isPublic) {
        assert.ok(op.responses['401'] && op.responses['403'], `${method} ${url} 401/403`);
        const [bearer, apiKey] = op.security!.map((s) => Object.values(s)[0]![0]!);
        assert.match(bearer!, /^sandbox\.(boxes\.read|boxes\.write|exec|operator)$/);
        assert.equal(apiKey, bearer, `${method} ${url} asks the same permission of both`);
      }
      if (pathParams.length > 0) assert.ok(op.responses['404'], `${method} ${url} 404`);
      for (const [status, answer] of Object.entries(op.responses)) {
        if (Number(status) < 400) continue;
        assert.deepEqual(answer.content?.['application/json']?.schema, {
          $ref: '#/components/schemas/Error',
        });
      }
    }
    // …and documents nothing else.
    let operations = 0;
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const method of METHODS.filter((m) => item[m])) {
        operations++;
        const url = path.replace(/\{(\w+)\}/g, ':$1');
        assert.ok(server.app.hasRoute({ method: method.toUpperCase() as 'GET', url }), `${method} ${path}`);
      }
    }
    assert.equal(operations, routes.length);
  });

  it('the Error schema enumerates the codes and types of ERROR_CODES, each code with its status', () => {
    // biome-ignore lint/suspicious/noExplicitAny: the schema is read field by field
    const error = (doc.components.schemas.Error as any).properties.error.properties;
    assert.deepEqual(error.code.enum, Object.keys(ERROR_CODES));
    assert.deepEqual(
      [...error.type.enum].sort(),
      [...new Set(Object.values(ERROR_CODES).map((c) => c.type))].sort(),
    );
    for (const [code, info] of Object.entries(ERROR_CODES)) {
      assert.ok(error.code.description.includes(`\`${code}\` (${info.status})`), code);
    }
    // Each documented error answer describes the codes of its status.
    assert.match(
      doc.paths['/v1/volumes/{volume}']!.get!.responses['404']!.description!,
      /`volume_not_found`/,
    );
  });

  it('documents query parameters, non-JSON media and request bodies from the route schemas', () => {
    const content = doc.paths['/v1/boxes/{box}/files/content']!;
    assert.ok(content.get!.responses['200']!.content!['application/octet-stream']);
    assert.ok(content.put!.requestBody!.content['application/octet-stream']);
    assert.deepEqual(
      content.put!.parameters!.filter((p) => p.in === 'query').map((p) => [p.name, p.required ?? false]),
      [
        ['path', true],
        ['mode', false],
      ],
    );
    assert.ok(
      doc.paths['/v1/boxes/{box}/files/watch']!.get!.responses['200']!.content!['application/x-ndjson'],
    );
    assert.ok(doc.paths['/metrics']!.get!.responses['200']!.content!['text/plain; version=0.0.4']);
    assert.ok(doc.paths['/v1/executions/stream']!.get!.responses['101']);
    assert.ok(doc.paths['/v1/boxes/{box}/executions/{execution}/attach']!.get!.responses['426']);
    assert.deepEqual(doc.paths['/v1/boxes']!.post!.requestBody!.content['application/json'], {
      schema: { $ref: '#/components/schemas/BoxOptions' },
    });
    for (const field of ['auto_pause', 'timeout_ms', 'health_check', 'entrypoint']) {
      assert.ok((doc.components.schemas.BoxOptions!.properties as Record<string, unknown>)[field], field);
    }
    for (const path of ['/v1/pools', '/v1/pools/{pool}', '/v1/pools/{pool}/filled'])
      assert.ok(doc.paths[path], path);
  });

  it('is a valid OpenAPI 3.1 document (@apidevtools/swagger-parser), the same as openApiDocument()', async () => {
    assert.equal(doc.openapi, '3.1.0');
    await SwaggerParser.validate(structuredClone(doc) as never);
    assert.deepEqual(await openApiDocument(), doc);
  });
});

describe('route schemas at work', { timeout: 60_000 }, () => {
  /** Checks a live answer against the documented 2xx schema of an operation. */
  function conforms(path: string, method: string, status: number, body: unknown): void {
    const ajv = new Ajv({ strict: false, allowUnionTypes: true, validateFormats: false });
    const schemas = Object.fromEntries(
      Object.entries(doc.components.schemas).map(([name, { $id: _id, ...schema }]) => [name, schema]),
    );
    const schema = doc.paths[path]![method]!.responses[String(status)]!.content!['application/json']!.schema;
    // The document's `#/components/schemas/…` references resolve inside this root.
    const validate = ajv.compile({ allOf: [schema], components: { schemas } });
    assert.ok(validate(body), `${method} ${path} ${status}: ${JSON.stringify(validate.errors)}`);
  }

  it('answers match the documented response schemas; bad requests are 400s naming the field', async () => {
    const call = async (method: string, path: string, body?: unknown) => {
      const response = await fetch(server.url + path, {
        method,
        ...(body === undefined
          ? {}
          : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
      });
      const text = await response.text();
      return { status: response.status, body: text ? JSON.parse(text) : null };
    };
    const rest = new JsRuntime({ url: server.url });
    const created = await call('POST', '/v1/boxes', { image: BUSYBOX, network: { mode: 'disabled' } });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    conforms('/v1/boxes', 'post', 201, created.body);
    const id = created.body.id as string;
    conforms('/v1/boxes', 'get', 200, (await call('GET', '/v1/boxes')).body);
    conforms('/v1/boxes/{box}/metrics', 'get', 200, (await call('GET', `/v1/boxes/${id}/metrics`)).body);
    conforms('/v1/metrics', 'get', 200, (await call('GET', '/v1/metrics')).body);
    const started = await call('POST', `/v1/boxes/${id}/executions`, { cmd: 'true' });
    conforms('/v1/boxes/{box}/executions', 'post', 201, started.body);
    conforms(
      '/v1/boxes/{box}/executions/{execution}',
      'get',
      200,
      (await call('GET', `/v1/boxes/${id}/executions/${started.body.id}`)).body,
    );
    await (await rest.get(id))!.files.write('/tmp/a.txt', 'hello');
    conforms(
      '/v1/boxes/{box}/files',
      'get',
      200,
      (await call('GET', `/v1/boxes/${id}/files?path=/tmp`)).body,
    );
    conforms(
      '/v1/boxes/{box}/files/stat',
      'get',
      200,
      (await call('GET', `/v1/boxes/${id}/files/stat?path=/tmp/a.txt`)).body,
    );
    conforms('/v1/volumes', 'post', 201, (await call('POST', '/v1/volumes', { name: 'doc-vol' })).body);
    conforms('/v1/images', 'get', 200, (await call('GET', '/v1/images')).body);

    for (const [method, path, body, code, field] of [
      ['POST', `/v1/boxes/${id}/executions`, { cmd: 'true', colour: 'red' }, 'unknown_field', 'colour'],
      ['POST', `/v1/boxes/${id}/executions`, { cmd: 'true', args: [1] }, 'invalid_option', 'args[0]'],
      ['POST', `/v1/boxes/${id}/executions`, { args: [] }, 'invalid_option', 'cmd'],
      ['GET', `/v1/boxes/${id}/files?path=/tmp&depth=0x10`, undefined, 'invalid_option', 'depth'],
      ['GET', `/v1/boxes/${id}/files`, undefined, 'invalid_option', 'path'],
      ['POST', `/v1/boxes/${id}/timeout`, { timeout_ms: 0 }, 'invalid_option', 'timeout_ms'],
      ['POST', '/v1/pools', { image: BUSYBOX, size: 65 }, 'invalid_option', 'size'],
      ['POST', '/v1/pools', { image: BUSYBOX, size: 1, options: { cpus: -1 } }, 'invalid_option', 'cpus'],
      [
        'POST',
        '/v1/pools',
        { image: BUSYBOX, size: 1, options: { volumes: [{ host_path: '/etc', guest_path: '/host-etc' }] } },
        'invalid_option',
        'volumes[0].hostPath',
      ],
      [
        'POST',
        '/v1/pools',
        { image: BUSYBOX, size: 1, options: { rootfs_path: '/' } },
        'invalid_option',
        'rootfsPath',
      ],
    ] as const) {
      const r = await call(method, path, body);
      assert.equal(r.status, 400, `${method} ${path} ${JSON.stringify(body)}`);
      assert.deepEqual([r.body.error.code, r.body.error.field], [code, field], JSON.stringify(r.body));
    }
    // No refused pool was created: no box holds a host path.
    assert.deepEqual((await call('GET', '/v1/pools')).body, []);
    await rest.remove(id, true);
    await rest.volumes.remove('doc-vol');
  });
});
