/**
 * Operator configuration of the MCP server (`sandbox mcp`, `/mcp` on `sandbox serve`), safe by default:
 * per-session limits, the network destinations a tool call may open, the host directories the
 * file transfer tools may touch, and the output bounds of tool results.
 */
import { resolve } from 'node:path';
import { BoxError } from '../errors.ts';

/** Limits and policies of every MCP session of one server. */
export interface McpConfig {
  /** Boxes one session may hold at once; default 5. */
  maxBoxes: number;
  /** vCPUs all of a session's boxes may hold together; default 8. */
  maxCpus: number;
  /** Memory all of a session's boxes may hold together, MiB; default 8192. */
  maxMemoryMib: number;
  /** Longest lifetime of a box, seconds (its `timeoutMs`, after which it is removed); default 3600. */
  maxLifetimeSeconds: number;
  /**
   * Destinations a `create_box` call may allow (`allow_net`): host names, IPs or CIDRs as `NetworkSpec`
   * takes them; `['*']` allows any. Default `[]`: every box has no network.
   */
  allowNet: string[];
  /** Host directories `upload_from_host` / `download_to_host` may use (absolute); default none (tools off). */
  hostPaths: string[];
  /** Text a tool result carries per output stream, bytes; longer output is shortened and marked; default 32 KiB. */
  maxOutputBytes: number;
  /** Output of one command kept for the spill file and `read_output`, bytes per stream; default 8 MiB. */
  maxKeptBytes: number;
  /** Background commands (`start_command`) one session may have running at once; default 16. */
  maxCommands: number;
  /** Streamable HTTP only: sessions one tenant may have open at once (more answer 429); default 8. */
  maxSessionsPerTenant: number;
  /** Streamable HTTP only: sessions open at once in all (more answer 429); default 256. */
  maxSessions: number;
  /**
   * Streamable HTTP only: a session without a request for this long ends (its boxes are removed unless
   * persisted), ms; default 1800000 (30 minutes).
   */
  sessionIdleMs: number;
}

/** The defaults of {@link McpConfig}. */
export const DEFAULT_MCP_CONFIG: Readonly<McpConfig> = Object.freeze({
  maxBoxes: 5,
  maxCpus: 8,
  maxMemoryMib: 8192,
  maxLifetimeSeconds: 3600,
  allowNet: [],
  hostPaths: [],
  maxOutputBytes: 32 * 1024,
  maxKeptBytes: 8 * 1024 * 1024,
  maxCommands: 16,
  maxSessionsPerTenant: 8,
  maxSessions: 256,
  sessionIdleMs: 30 * 60_000,
});

const NUMERIC = [
  'maxBoxes',
  'maxCpus',
  'maxMemoryMib',
  'maxLifetimeSeconds',
  'maxOutputBytes',
  'maxKeptBytes',
  'maxCommands',
  'maxSessionsPerTenant',
  'maxSessions',
  'sessionIdleMs',
] as const;

/**
 * The configuration `partial` over the defaults, checked.
 * @throws BoxError `invalid_option` naming the field: a limit that is not a positive integer, `allowNet`
 *   not an array of non-empty strings, a `hostPaths` entry that is not absolute.
 */
export function mcpConfig(partial: Partial<McpConfig> = {}): McpConfig {
  if (partial === null || typeof partial !== 'object') {
    throw new BoxError('MCP configuration must be an object', { field: 'mcp' });
  }
  const config: McpConfig = { ...DEFAULT_MCP_CONFIG, ...partial };
  for (const field of NUMERIC) {
    const value = config[field];
    if (!Number.isSafeInteger(value) || value <= 0) {
      throw new BoxError(`invalid MCP option ${field}: must be a positive integer`, { field });
    }
  }
  for (const field of ['allowNet', 'hostPaths'] as const) {
    const list = config[field];
    if (!Array.isArray(list) || list.some((v) => typeof v !== 'string' || v === '')) {
      throw new BoxError(`invalid MCP option ${field}: must be an array of non-empty strings`, { field });
    }
  }
  if (config.hostPaths.some((p) => !p.startsWith('/'))) {
    throw new BoxError('invalid MCP option hostPaths: every entry must be an absolute path', {
      field: 'hostPaths',
    });
  }
  config.hostPaths = config.hostPaths.map((p) => resolve(p));
  return config;
}
