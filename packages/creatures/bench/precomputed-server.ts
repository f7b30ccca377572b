/**
 * The upper bound of the benchmark: a bare `node:http` server that reads each request body and writes a
 * precomputed answer for it, with the same `content-type` and `content-length` headers as the creature
 * server — all of the HTTP work and none of GraphQL's. The answers come from the JSON file named by
 * `BENCH_ANSWERS` (request body → response body). Prints `{"port": N}` on stdout once listening; stops on
 * SIGTERM. An unknown body gets 404.
 */
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';

const answers = new Map<string, string>(
  Object.entries(JSON.parse(readFileSync(process.env.BENCH_ANSWERS ?? '', 'utf8')) as Record<string, string>),
);
const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    const body = answers.get(Buffer.concat(chunks).toString('utf8'));
    if (body === undefined) {
      res.writeHead(404);
      res.end();
      return;
    }
    res.writeHead(200, [
      'content-type',
      'application/json; charset=utf-8',
      'content-length',
      String(Buffer.byteLength(body)),
    ]);
    res.end(body);
  });
});
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  console.log(JSON.stringify({ port: typeof address === 'object' && address ? address.port : 0 }));
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
