/**
 * The upper bound of the benchmark: a bare `node:http` server that reads each request body and writes a
 * precomputed answer for it — UTF-8 bytes encoded once at start — with precomputed `content-type` and
 * `content-length` headers (the ones the creature server sends): all of the HTTP work and none of
 * GraphQL's. The answers come from the JSON file named by
 * `BENCH_ANSWERS` (request body → response body). Prints `{"port": N}` on stdout once listening; stops on
 * SIGTERM. An unknown body gets 404.
 */
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';

const answers = new Map<string, { body: Buffer; headers: string[] }>();
for (const [request, body] of Object.entries(
  JSON.parse(readFileSync(process.env.BENCH_ANSWERS ?? '', 'utf8')) as Record<string, string>,
)) {
  const bytes = Buffer.from(body, 'utf8');
  const headers = ['content-type', 'application/json; charset=utf-8', 'content-length', String(bytes.length)];
  answers.set(request, { body: bytes, headers });
}
const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    const answer = answers.get(Buffer.concat(chunks).toString('utf8'));
    if (answer === undefined) {
      res.writeHead(404);
      res.end();
      return;
    }
    res.writeHead(200, answer.headers);
    res.end(answer.body);
  });
});
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  console.log(JSON.stringify({ port: typeof address === 'object' && address ? address.port : 0 }));
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
