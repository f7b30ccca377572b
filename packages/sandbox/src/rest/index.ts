/**
 * The REST runtime: `RestServer` exposes a local `JsRuntime` over HTTP (`sandbox serve`);
 * `RestRuntime` is the client behind `new JsRuntime({ url, apiKey })`.
 */
export { Authenticator, type AuthOptions, isLoopback, type JwtAuthOptions, type Principal } from './auth.ts';
export {
  RestBox,
  RestExecution,
  RestRuntime,
  type RestRuntimeOptions,
  type RestVolumes,
  restOptionsFrom,
} from './client.ts';
export { MAX_RECONNECTS, RemoteProcess } from './process.ts';
export {
  DEFAULT_HOST,
  DEFAULT_PORT,
  openApiDocument,
  RestServer,
  type RestServerOptions,
  startRestServer,
} from './server.ts';
export { DEFAULT_BACKLOG_BYTES, ExecSession } from './sessions.ts';
export { Channel, type ErrorBody, HttpError, Permission } from './wire.ts';
