/**
 * The MCP server over Streamable HTTP at `/mcp` on `sandbox serve` (MCP 2025-06-18
 * "Streamable HTTP"): `POST` carries JSON-RPC messages (an `initialize` request without `Mcp-Session-Id`
 * opens a session), `GET` opens the server's SSE stream, `DELETE` ends the session. Every request passes
 * the server's authentication (permission `sandbox.exec`); a session belongs to the caller that opened it
 * and works on its tenant's boxes under its tenant's quotas (`contextProvider`). Sessions are bounded in
 * number (per tenant and in all) and end after `sessionIdleMs` without a request; an ended session's boxes are
 * removed unless persisted. Host file transfers are never offered over HTTP.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Principal } from '../rest/auth.ts';
import type { ServerContext } from '../rest/context.ts';
import { principalOf } from '../rest/hooks.ts';
import { route } from '../rest/openapi.ts';
import { Permission } from '../rest/wire.ts';
import { type McpConfig, mcpConfig } from './config.ts';
import { contextProvider } from './provider.ts';
import { createSandboxMcp, type SandboxMcp } from './server.ts';

/** Options of the `/mcp` routes. */
export interface McpHttpOptions {
  ctx: ServerContext;
  /**
   * Operator limits of every session, and the session count and idle limits (`maxSessionsPerTenant`,
   * `maxSessions`, `sessionIdleMs`); checked by {@link mcpConfig}. `hostPaths` is ignored: no host
   * transfers over HTTP.
   */
  config?: Partial<McpConfig>;
}

interface OpenSession {
  mcp: SandboxMcp;
  transport: StreamableHTTPServerTransport;
  tenant: string;
  subject: string;
  timer: NodeJS.Timeout;
  /** POST requests of the session still being answered (a session does not idle out under them). */
  inflight: number;
}

/** A JSON-RPC error answer (no id: the transport level refused the request). */
function refuse(reply: FastifyReply, status: number, message: string): FastifyReply {
  return reply.code(status).send({ jsonrpc: '2.0', error: { code: -32000, message }, id: null });
}

/** Registers `POST`, `GET` and `DELETE /mcp` (a Fastify plugin). */
export async function mcpRoutes(app: FastifyInstance, options: McpHttpOptions): Promise<void> {
  const sessions = new Map<string, OpenSession>();
  const config = mcpConfig({ ...options.config, hostPaths: [] });
  const { maxSessionsPerTenant: maxPerTenant, maxSessions, sessionIdleMs: idleMs } = config;

  const end = async (id: string) => {
    const open = sessions.get(id);
    if (!open) return;
    sessions.delete(id);
    clearTimeout(open.timer);
    await open.mcp.server.close().catch(() => {});
  };
  // The idle clock restarts on every request and when a POST answer ends; it ends the session only
  // when no POST is being answered (an open GET stream does not keep a session alive).
  const touch = (id: string, open: OpenSession) => {
    clearTimeout(open.timer);
    open.timer = setTimeout(() => {
      if (open.inflight > 0) touch(id, open);
      else void end(id);
    }, idleMs);
    open.timer.unref();
  };

  const open = async (request: FastifyRequest, reply: FastifyReply, principal: Principal) => {
    const mine = [...sessions.values()].filter((s) => s.tenant === principal.tenant).length;
    if (mine >= maxPerTenant || sessions.size >= maxSessions) {
      reply.header('retry-after', '60');
      const limit = mine >= maxPerTenant ? `${maxPerTenant} per tenant` : `${maxSessions} in all`;
      return refuse(reply, 429, `too many MCP sessions (at most ${limit}); end one with DELETE /mcp`);
    }
    const mcp = createSandboxMcp(contextProvider(options.ctx, principal), config, (entry) =>
      app.log.info({ mcp_tool_call: { ...entry, tenant: principal.tenant } }, 'mcp tool call'),
    );
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => {
        const entry: OpenSession = {
          mcp,
          transport,
          tenant: principal.tenant,
          subject: principal.subject,
          timer: setTimeout(() => {}, 0),
          inflight: 0,
        };
        sessions.set(id, entry);
        touch(id, entry);
      },
      onsessionclosed: (id) => end(id),
    });
    await mcp.server.connect(transport);
    reply.hijack();
    await transport.handleRequest(request.raw, reply.raw, request.body);
    // An initialize request that did not open a session (refused by the transport) leaves nothing behind.
    if (!transport.sessionId || !sessions.has(transport.sessionId)) await mcp.server.close().catch(() => {});
  };

  const handle = async (request: FastifyRequest, reply: FastifyReply) => {
    const principal = principalOf(request);
    const header = request.headers['mcp-session-id'];
    const id = Array.isArray(header) ? header[0] : header;
    if (id === undefined) {
      if (request.method === 'POST' && isInitializeRequest(request.body))
        return open(request, reply, principal);
      return refuse(reply, 400, 'no Mcp-Session-Id: send an initialize request first');
    }
    const session = sessions.get(id);
    // Another caller's session is not found, as an unknown one.
    if (!session || session.tenant !== principal.tenant || session.subject !== principal.subject) {
      return refuse(reply, 404, 'unknown MCP session');
    }
    touch(id, session);
    if (request.method === 'POST') {
      session.inflight += 1;
      reply.raw.once('close', () => {
        session.inflight -= 1;
        if (sessions.get(id) === session) touch(id, session);
      });
    }
    reply.hijack();
    await session.transport.handleRequest(
      request.raw as IncomingMessage,
      reply.raw as ServerResponse,
      request.body,
    );
  };

  const doc = (summary: string) =>
    route(Permission.exec, {
      tags: ['mcp'],
      summary,
      description:
        'MCP Streamable HTTP transport (JSON-RPC 2.0; see the README "MCP server"); answers are JSON or ' +
        'text/event-stream per the MCP specification.',
      response: { 200: { description: 'a JSON-RPC answer or an SSE stream' } },
      errors: [400, 404, 429],
    });
  app.post('/mcp', doc('MCP messages (initialize opens a session)'), handle);
  app.get('/mcp', doc('the MCP server-to-client SSE stream of a session'), handle);
  app.delete('/mcp', doc('ends an MCP session (its boxes are removed unless persisted)'), handle);
  app.addHook('onClose', async () => {
    await Promise.all([...sessions.keys()].map((id) => end(id)));
  });
}
