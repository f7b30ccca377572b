#!/usr/bin/env node
/**
 * Published entry of the `sandbox` command. It checks the Node.js version before it loads anything that
 * needs a newer one, so that an older Node prints one line naming the required version instead of a
 * stack trace, then runs the compiled command from `dist/` (built by `npm run build`, run by `prepack`).
 * In this repository the command also runs from source: `node bin/sandbox.ts`.
 */
const REQUIRED_NODE_MAJOR = 22;
const major = Number(process.versions.node.split('.')[0]);
if (major < REQUIRED_NODE_MAJOR) {
  console.error(
    `sandbox: Node.js ${REQUIRED_NODE_MAJOR} or later is required; this is Node.js ${process.versions.node}.`,
  );
  process.exit(1);
}
const { runCli } = await import('../dist/bin/sandbox.js');
await runCli();
