/**
 * `@seed/sandbox`: the Sandbox SDK for Node.js (spec 002). Local runtime (`JsRuntime`), box handles
 * (`JsBox`), executions (`JsExecution`), wrapper boxes (`SimpleBox`, `CodeBox`), the spec's constants,
 * errors and data types.
 */

export {
  BROWSERBOX_CPUS,
  BROWSERBOX_IMAGES,
  BROWSERBOX_MEMORY_MIB,
  BROWSERBOX_PORTS,
  BROWSERBOX_START_TIMEOUT,
  BrowserBox,
  type BrowserBoxOptions,
} from './boxes/browser.ts';
export { CodeBox, type CodeBoxOptions } from './boxes/code.ts';
export {
  COMPUTERBOX_DISPLAY,
  COMPUTERBOX_IMAGE,
  COMPUTERBOX_SCROLL_AMOUNT,
  ComputerBox,
  type ComputerBoxOptions,
  SCROLL_BUTTONS,
  type ScrollDirection,
} from './boxes/computer.ts';
export {
  INTERACTIVEBOX_DEFAULT_SHELL,
  InteractiveBox,
  type InteractiveBoxOptions,
  type InteractiveStreams,
} from './boxes/interactive.ts';
export {
  type BoxDefaults,
  type ExecCommandOptions,
  SIMPLEBOX_DEFAULT_IMAGE,
  SimpleBox,
  type SimpleBoxOptions,
} from './boxes/simple.ts';
export * from './constants.ts';
export {
  BOX_ERROR_CODES,
  BoxError,
  type BoxErrorCode,
  type BoxErrorOptions,
  ExecError,
  isBoxErrorCode,
  OptionTypeError,
  ParseError,
  TimeoutError,
} from './errors.ts';
export {
  type ImageInfo,
  ImageStore,
  type PreparedImage,
  type PullOptions,
  type PullProgress,
  renderPullProgress,
} from './images/index.ts';
export { DEFAULT_IMAGE_LIMITS, type ImageLimits } from './images/limits.ts';
export {
  defaultHomeDir,
  JsRuntime,
  type RuntimeBackend,
  type RuntimeImages,
  type RuntimeVolumes,
} from './js-runtime.ts';
export { RestBox, RestExecution, RestRuntime, type RestRuntimeOptions } from './rest/client.ts';
export {
  type AccessToken,
  ApiKeyCredential,
  type Credential,
  RuntimeRestOptions,
} from './rest/credential.ts';
// The server loads on first use (`rest/serve.ts`); the `RestServer` class is `@seed/sandbox/server`.
export { openApiDocument, type RestServer, type RestServerOptions, startRestServer } from './rest/serve.ts';
export type { ImportedBox, ImportOptions } from './runtime/archive-options.ts';
export { type ExecEnv, type ExecOptions, JsBox } from './runtime/box.ts';
export { type JsExecStderr, type JsExecStdin, type JsExecStdout, JsExecution } from './runtime/execution.ts';
export { BoxFiles, type ReadFormat } from './runtime/files/files.ts';
export type {
  CopyOptions,
  FilesystemEvent,
  FilesystemEventType,
  FileType,
  JsEntryInfo,
  JsWriteInfo,
  WatchHandle,
  WatchOptions,
  WriteData,
} from './runtime/files/types.ts';
export { LocalRuntime } from './runtime/local.ts';
export { type NormalizedBoxOptions, type ValidateContext, validateBoxOptions } from './runtime/options.ts';
export type { JsBoxPool, PoolSpec } from './runtime/pool.ts';
export { BoxSnapshots, type CloneOptions, type SnapshotInfo } from './runtime/snapshots.ts';
export type { VolumeRecord } from './runtime/state.ts';
export type * from './types.ts';
