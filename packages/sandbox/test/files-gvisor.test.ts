/**
 * The files suite (`files-suite.ts`) on the gVisor tier: the same assertions as on the container tier,
 * with the files moved by a helper inside the box (src/runtime/files/gvisor.ts).
 */
import { after, describe } from 'node:test';
import { JsRuntime } from '../src/index.ts';
import { filesSuite } from './files-suite.ts';
import { cleanupAll, ensureRegistry, GVISOR_SKIP, REGISTRIES, tempHome } from './runtime-helpers.ts';

const skip = GVISOR_SKIP;

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
