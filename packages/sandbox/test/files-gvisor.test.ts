/**
 * The files suite (`files-suite.ts`) on the gVisor tier: the same assertions as on the container tier,
 * with the files moved by a helper inside the box (src/runtime/files/gvisor.ts).
 */
import { after, describe } from 'node:test';
import { findExecutable } from '../src/engine/engine.ts';
import { JsRuntime } from '../src/js-runtime.ts';
import { filesSuite } from './files-suite.ts';
import { cleanupAll, ensureRegistry, REGISTRIES, tempHome } from './runtime-helpers.ts';

const skip = findExecutable('runsc') ? false : 'runsc is not installed (npm run test:setup installs it)';

if (skip) describe('box.files on the gVisor tier', { skip }, () => {});
else {
  filesSuite('box.files on the gVisor tier', 'gvisor', async () => {
    // ptrace explicitly: the KVM probe is covered by gvisor.test.ts.
    process.env.SEED_SANDBOX_GVISOR_PLATFORM = 'ptrace';
    ensureRegistry();
    const runtime = new JsRuntime({
      homeDir: tempHome('sandbox-files-gv-'),
      imageRegistries: REGISTRIES,
      isolation: 'gvisor',
    });
    return { kind: 'gvisor', runtime };
  });
}

after(cleanupAll);
