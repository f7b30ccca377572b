/**
 * Audit writing (spec 001 "Audit event" and "Events": every credential validation writes one). Wraps a store's
 * `appendAudit` with a clock and strips secret-looking fields from `details`, so no password, secret or token
 * reaches the audit log.
 */
import type { AuditEvent, AuthStore, NewAuditEvent } from './store/types.ts';

/** Where audit events go: any store (or a test double) with `appendAudit`. */
export type AuditSink = Pick<AuthStore, 'appendAudit'>;

const SECRET_KEY = /pass(word)?|secret|token|authorization|cookie|code_verifier|assertion|private/i;

/**
 * Returns a copy of `details` without keys that look like secrets (password, secret, token, authorization,
 * cookie, code_verifier, assertion, private…), recursively; `undefined` values are dropped.
 */
export function redactDetails(details: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(details)) {
    if (SECRET_KEY.test(key) || value === undefined) continue;
    out[key] =
      value && typeof value === 'object' && !Array.isArray(value)
        ? redactDetails(value as Record<string, unknown>)
        : value;
  }
  return out;
}

/** Writes audit events with a clock and redacted details. */
export class AuditLog {
  readonly #sink: AuditSink;
  readonly #now: () => number;

  /** @param now clock, ms epoch (default `Date.now`). */
  constructor(sink: AuditSink, now: () => number = Date.now) {
    this.#sink = sink;
    this.#now = now;
  }

  /**
   * Appends one event (time defaults to the clock).
   * @throws whatever the sink throws (e.g. `ValidationError` for a missing category) — auditing fails closed.
   */
  write(event: NewAuditEvent): Promise<AuditEvent> {
    return this.#sink.appendAudit({
      ...event,
      time: event.time ?? this.#now(),
      details: event.details ? redactDetails(event.details) : null,
    });
  }
}
