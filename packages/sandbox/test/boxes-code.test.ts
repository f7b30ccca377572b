/**
 * `CodeBox` (spec 002 "CodeBox") and the `python:slim` default of `SimpleBox`, against the local
 * registry's `python:slim`. pip cannot reach PyPI here: `installPackage` is tested with a wheel built in
 * the box, and a failing install with a missing file. `runCode` (stateful Jupyter contexts) runs the
 * shared interpreter suite (`interpreter-suite.ts`) on the local runtime, in the same image store.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { BoxError, CodeBox, ExecError, type JsRuntime, SimpleBox } from '../src/index.ts';
import { codeInterpreterSuite } from './interpreter-suite.ts';
import { cleanupAll, ensureRegistry, tempHome, testRuntime } from './runtime-helpers.ts';

/** Python that writes a minimal pure-Python wheel `hello_box` (PEP 427) to /tmp. */
const BUILD_WHEEL = `
import zipfile
files = {
  'hello_box/__init__.py': 'GREETING = "hi from a wheel"\\n',
  'hello_box-0.1.dist-info/METADATA': 'Metadata-Version: 2.1\\nName: hello-box\\nVersion: 0.1\\n',
  'hello_box-0.1.dist-info/WHEEL': 'Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n',
}
path = '/tmp/hello_box-0.1-py3-none-any.whl'
with zipfile.ZipFile(path, 'w') as z:
  for name, text in files.items():
    z.writestr(name, text)
  z.writestr('hello_box-0.1.dist-info/RECORD', ''.join(f'{n},,\\n' for n in files) + 'hello_box-0.1.dist-info/RECORD,,\\n')
print(path)
`;

/** The runtime of every test here (one image store: python:slim is pulled once). */
let runtime: JsRuntime;

describe('CodeBox', () => {
  let box: CodeBox;

  before(() => {
    ensureRegistry();
    runtime = testRuntime();
    box = new CodeBox({ runtime });
  });

  after(async () => {
    await box.stop();
  });

  it('defaults to python:slim and runs Python code, returning stdout', async () => {
    assert.equal(await box.run('print(6 * 7)'), '42\n');
    assert.equal((await box.getInfo()).image, 'python:slim');
    assert.equal(await box.run('import sys\nprint(sys.version_info[0])'), '3\n');
  });

  it('raises ExecError with exit code and traceback when the code fails', async () => {
    await assert.rejects(box.run('1/0'), (error: unknown) => {
      assert.ok(error instanceof ExecError && error instanceof BoxError);
      assert.equal(error.exitCode, 1);
      assert.match(error.stderr, /ZeroDivisionError/);
      assert.match(error.command, /^python3 -c /);
      return true;
    });
  });

  it('runScript runs a host file; a missing file is a BoxError', async () => {
    const dir = tempHome('sandbox-script-');
    const script = join(dir, 'script.py');
    writeFileSync(script, 'import platform\nprint("script on", platform.system())\n');
    assert.equal(await box.runScript(script), 'script on Linux\n');
    await assert.rejects(box.runScript(join(dir, 'missing.py')), /cannot read script/);
  });

  it('installPackage installs a wheel with pip; a failing install is an ExecError', async () => {
    const wheel = (await box.run(BUILD_WHEEL)).trim();
    const out = await box.installPackage(wheel);
    assert.match(out, /Successfully installed hello-box-0.1/);
    assert.equal(await box.run('import hello_box; print(hello_box.GREETING)'), 'hi from a wheel\n');
    await assert.rejects(box.installPackages('/tmp/missing-1.0-py3-none-any.whl'), (error: unknown) => {
      return (
        error instanceof ExecError && error.exitCode !== 0 && /missing-1.0/.test(error.stderr + error.command)
      );
    });
    await assert.rejects(box.installPackage('--index-url=http://x'), /not an option/);
  });

  it('SimpleBox also defaults to python:slim', async () => {
    await using simple = new SimpleBox({ runtime });
    const r = await simple.exec('python3', '-c', 'print("py")');
    assert.equal(r.stdout, 'py\n');
    assert.equal((await simple.getInfo()).image, 'python:slim');
  });
});

describe('E2B code-interpreter-v1 template image', () => {
  it('runs kernels as its default user in /home/user and plots', async () => {
    await using box = new CodeBox({ runtime, image: 'code-interpreter-v1' });
    const who = await box.runCode('import os, getpass; (getpass.getuser(), os.getcwd())');
    assert.equal(who.error, null);
    assert.equal(who.text, "('user', '/home/user')");
    const plot = await box.runCode('import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()');
    assert.ok(plot.results.some((r) => r.png !== undefined));
    const root = await box.exec('id', ['-u'], undefined, { user: 'root' });
    assert.equal(root.stdout, '0\n', 'root stays selectable per command');
  });
});

codeInterpreterSuite('CodeBox.runCode on the local runtime', async () => runtime, {
  restartAfterGrace: true,
});

after(cleanupAll);
