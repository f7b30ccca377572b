#!/usr/bin/env node
/**
 * Entry of the `sandbox` command. It checks the Node.js version before it loads anything that needs a newer
 * one, then runs the compiled command from `dist/` (built by `npm run build`, run by `prepack`). In a
 * checkout of the repository, where `dist/` is not built, it runs the TypeScript source beside it
 * (`bin/sandbox.ts`) instead, under the Node.js the repository pins (`node_modules/node`) when the one that
 * started it is older than 22 or cannot strip types.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const REQUIRED_NODE_MAJOR = 22;
const compiled = new URL('../dist/bin/sandbox.js', import.meta.url);
const source = new URL('./sandbox.ts', import.meta.url);
const pinnedNode = fileURLToPath(new URL('../../../node_modules/node/bin/node', import.meta.url));
const major = Number(process.versions.node.split('.')[0]);
const fromSource = !existsSync(compiled) && existsSync(source);

if (major < REQUIRED_NODE_MAJOR || (fromSource && !process.features.typescript)) {
  if (fromSource && existsSync(pinnedNode) && process.execPath !== pinnedNode) {
    const run = spawnSync(pinnedNode, [fileURLToPath(import.meta.url), ...process.argv.slice(2)], {
      stdio: 'inherit',
    });
    process.exit(run.status ?? 1);
  }
  console.error(
    `sandbox: Node.js ${REQUIRED_NODE_MAJOR} or later is required; this is Node.js ${process.versions.node}.`,
  );
  process.exit(1);
}
const { runCli } = await import(fromSource ? source.href : compiled.href);
await runCli();
