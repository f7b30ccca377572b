/**
 * The verification page of the device authorization grant (RFC 8628 §3.3), on the login page's design:
 * `GET /device` (user code entry, prefilled from `verification_uri_complete`), `POST /device` (looks the
 * code up and shows what the device asks for), `POST /device/decision` (approve or deny). The user must be
 * signed in (else: to the login page and back); the forms are CSRF-protected (double submit, the login
 * page's cookie). Every decision and every unknown code entered is audited (Category `Authorization`).
 */
import csrf from '@fastify/csrf-protection';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { clientAddress } from '../client-address.ts';
import { AuditCategory, AuditOutcome } from '../store/types.ts';
import type { OAuthContext } from './context.ts';
import { DEVICE_VERIFICATION_PATH, displayUserCode, normalizeUserCode } from './device.ts';
import { NOT_FORM, registerFormParser } from './form.ts';
import { escapeHtml, layout } from './page.ts';
import { LOGIN_PATH } from './paths.ts';
import { readSession, secureCookies } from './session.ts';

/** Cookie of the CSRF secret: the login page's, so one secret serves both pages. */
const CSRF_COOKIE = 'seed_auth_csrf';

const PAGE_HEADERS = {
  'cache-control': 'no-store',
  'content-security-policy':
    "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};

function field(body: unknown, name: string): string | undefined {
  if (!(body instanceof URLSearchParams)) return undefined;
  const values = body.getAll(name);
  return values.length === 1 ? values[0] : undefined;
}

function codeForm(csrfToken: string, userCode: string, error?: string): string {
  const alert = error ? `<p class="error" role="alert">${escapeHtml(error)}</p>\n` : '';
  return layout(
    'Connect a device',
    `<h1>Connect a device</h1>
${alert}<p>Enter the code shown on your device.</p>
<form method="post" action="${DEVICE_VERIFICATION_PATH}">
<input type="hidden" name="_csrf" value="${escapeHtml(csrfToken)}">
<label for="user_code">Code</label>
<input type="text" id="user_code" name="user_code" value="${escapeHtml(userCode)}" autocomplete="off" required maxlength="32" autofocus>
<button type="submit">Continue</button>
</form>`,
  );
}

function consentForm(options: {
  csrfToken: string;
  userCode: string;
  clientName: string;
  scopes: string[];
  userName: string;
}): string {
  const scopes = options.scopes.length
    ? `<ul>${options.scopes.map((s) => `<li>${escapeHtml(s)}</li>`).join('')}</ul>`
    : '<p>No particular permissions.</p>';
  return layout(
    'Allow the device?',
    `<h1>Allow the device?</h1>
<p><strong>${escapeHtml(options.clientName)}</strong> asks to act as <strong>${escapeHtml(options.userName)}</strong> with code <strong>${escapeHtml(displayUserCode(options.userCode))}</strong>.</p>
<p>It requests:</p>
${scopes}
<form method="post" action="${DEVICE_VERIFICATION_PATH}/decision">
<input type="hidden" name="_csrf" value="${escapeHtml(options.csrfToken)}">
<input type="hidden" name="user_code" value="${escapeHtml(options.userCode)}">
<button type="submit" name="decision" value="approve">Allow</button>
<button type="submit" name="decision" value="deny">Deny</button>
</form>`,
  );
}

function done(title: string, message: string): string {
  return layout(title, `<h1>${escapeHtml(title)}</h1>\n<p>${escapeHtml(message)}</p>`);
}

/** Registers `GET /device`, `POST /device` and `POST /device/decision` on an encapsulated context. */
export function registerDeviceVerificationPage(app: FastifyInstance, ctx: OAuthContext): void {
  app.register(async (scope) => {
    registerFormParser(scope);
    await scope.register(csrf, {
      cookieKey: CSRF_COOKIE,
      cookieOpts: { path: '/', httpOnly: true, sameSite: 'strict', secure: secureCookies(ctx) },
      getToken: (req: FastifyRequest) => field(req.body, '_csrf'),
    });
    const page = (reply: FastifyReply, html: string, status = 200) =>
      reply.code(status).headers(PAGE_HEADERS).type('text/html; charset=utf-8').send(html);
    /** The signed-in user, or a redirect to the login page that comes back to `returnTo`. */
    const signedIn = async (req: FastifyRequest, reply: FastifyReply, returnTo: string) => {
      const active = await readSession(req, ctx);
      if (!active) {
        reply
          .header('cache-control', 'no-store')
          .redirect(`${LOGIN_PATH}?${new URLSearchParams({ return_to: returnTo })}`, 302);
      }
      return active;
    };

    scope.get(DEVICE_VERIFICATION_PATH, async (req, reply) => {
      const query = req.query as Record<string, unknown>;
      const typed = typeof query.user_code === 'string' ? query.user_code.slice(0, 32) : '';
      const normalized = normalizeUserCode(typed);
      const back = normalized
        ? `${DEVICE_VERIFICATION_PATH}?${new URLSearchParams({ user_code: displayUserCode(normalized) })}`
        : DEVICE_VERIFICATION_PATH;
      if (!(await signedIn(req, reply, back))) return reply;
      return page(reply, codeForm(reply.generateCsrf(), normalized ? displayUserCode(normalized) : typed));
    });

    scope.post(DEVICE_VERIFICATION_PATH, { preHandler: scope.csrfProtection }, async (req, reply) => {
      if (req.body === NOT_FORM)
        return reply.code(400).type('text/plain; charset=utf-8').send('form body expected\n');
      const active = await signedIn(req, reply, DEVICE_VERIFICATION_PATH);
      if (!active) return reply;
      const typed = field(req.body, 'user_code') ?? '';
      const userCode = normalizeUserCode(typed);
      const record = userCode ? await ctx.store.findDeviceCodeByUserCode(userCode) : undefined;
      const client = record ? await ctx.store.getClient(record.clientId) : undefined;
      if (!record || !client?.isEnabled || record.status !== 'pending' || record.expiresAt <= ctx.now()) {
        await ctx.store.appendAudit({
          category: AuditCategory.Authorization,
          outcome: AuditOutcome.Denied,
          subjectId: active.user.id,
          subjectName: active.user.userName,
          clientId: record?.clientId ?? null,
          failureCode: 'invalid_user_code',
          remoteAddress: clientAddress(req),
          details: { action: 'device.verify' },
        });
        return page(
          reply,
          codeForm(reply.generateCsrf(), typed.slice(0, 32), 'Unknown or expired code.'),
          400,
        );
      }
      return page(
        reply,
        consentForm({
          csrfToken: reply.generateCsrf(),
          userCode: record.userCode,
          clientName: client.displayName || client.clientId,
          scopes: record.scope.split(' ').filter(Boolean),
          userName: active.user.userName,
        }),
      );
    });

    scope.post(
      `${DEVICE_VERIFICATION_PATH}/decision`,
      { preHandler: scope.csrfProtection },
      async (req, reply) => {
        if (req.body === NOT_FORM)
          return reply.code(400).type('text/plain; charset=utf-8').send('form body expected\n');
        const active = await signedIn(req, reply, DEVICE_VERIFICATION_PATH);
        if (!active) return reply;
        const userCode = normalizeUserCode(field(req.body, 'user_code'));
        const decision = field(req.body, 'decision');
        if (!userCode || (decision !== 'approve' && decision !== 'deny'))
          return page(reply, codeForm(reply.generateCsrf(), '', 'Unknown or expired code.'), 400);
        const approved = decision === 'approve';
        const record = await ctx.store.findDeviceCodeByUserCode(userCode);
        const applied = await ctx.store.decideDeviceCode(userCode, approved, active.user.id, ctx.now());
        await ctx.store.appendAudit({
          category: AuditCategory.Authorization,
          outcome: applied && approved ? AuditOutcome.Success : AuditOutcome.Denied,
          subjectId: active.user.id,
          subjectName: active.user.userName,
          clientId: record?.clientId ?? null,
          failureCode: applied ? (approved ? null : 'access_denied') : 'invalid_user_code',
          remoteAddress: clientAddress(req),
          details: { action: 'device.decision', decision },
        });
        if (!applied) return page(reply, codeForm(reply.generateCsrf(), '', 'Unknown or expired code.'), 400);
        return page(
          reply,
          approved
            ? done('Device connected', 'You can return to your device.')
            : done('Request denied', 'The device was not given access.'),
        );
      },
    );
  });
}
