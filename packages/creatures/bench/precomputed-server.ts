/**
 * The upper bound of the benchmark: a bare `node:http` server that reads each request body and writes a
 * precomputed answer for it — UTF-8 bytes encoded once at start — with precomputed `content-type` and
 * `content-length` headers (the ones the creature server sends): all of the HTTP work and none of
 * GraphQL's. The answer is written the way the creature server writes its answers (`endWith` in
 * `src/http/respond.ts`), the cheapest node:http offers: up to `ONE_WRITE_BYTES` its bytes as a latin1
 * string, which node writes in one `write` with the head; a larger one as bytes. The body is matched as bytes (answers by body length, then one byte comparison), so that
 * finding the answer costs less than any server's look-up of a query (no string is made or hashed).
 * The answers come from the JSON file named by `BENCH_ANSWERS` (request body → response body). Prints
 * `{"port": N}` on stdout once listening; stops on SIGTERM. An unknown body gets 404.
 */
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { ONE_WRITE_BYTES } from '../src/http/respond.ts';

/** Answers by request body length: the request's bytes, the answer's bytes (as latin1 text) and headers. */
const answers = new Map<number, { request: Buffer; body: string | Buffer; headers: string[] }[]>();
for (const [request, answerText] of Object.entries(
  JSON.parse(readFileSync(process.env.BENCH_ANSWERS ?? '', 'utf8')) as Record<string, string>,
)) {
  const key = Buffer.from(request, 'utf8');
  const bytes = Buffer.from(answerText, 'utf8');
  const headers = ['content-type', 'application/json; charset=utf-8', 'content-length', String(bytes.length)];
  const sameLength = answers.get(key.length) ?? [];
  const body = bytes.length <= ONE_WRITE_BYTES ? bytes.toString('latin1') : bytes;
  sameLength.push({ request: key, body, headers });
  answers.set(key.length, sameLength);
}
const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    const request = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
    let answer: { body: string | Buffer; headers: string[] } | undefined;
    for (const candidate of answers.get(request.length) ?? []) {
      if (candidate.request.equals(request)) answer = candidate;
    }
    if (answer === undefined) {
      res.writeHead(404);
      res.end();
      return;
    }
    res.writeHead(200, answer.headers);
    if (typeof answer.body === 'string') res.end(answer.body, 'latin1');
    else res.end(answer.body);
  });
});
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  console.log(JSON.stringify({ port: typeof address === 'object' && address ? address.port : 0 }));
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
