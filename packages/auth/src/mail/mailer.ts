/**
 * Self-service mail (password reset, e-mail verification) over SMTP with `nodemailer`, configured by URL
 * (`smtp://user:pass@host:587`, `smtps://…:465`; `nodemailer`'s URL form, STARTTLS when the server offers
 * it). {@link resolveSelfService} checks the settings; {@link Mailer.send} sends one plain-text message.
 */
import nodemailer, { type Transporter } from 'nodemailer';

/** Options of self-service (`oauth.selfService`; `AUTH_SMTP_URL`, `AUTH_MAIL_FROM` in the environment). */
export interface SelfServiceOptions {
  /** SMTP URL (`smtp:` or `smtps:`). Without it, password reset and e-mail verification are off. */
  smtpUrl?: string;
  /** `From` address of the mails. Default `no-reply@<issuer host>`. */
  from?: string;
  /** Lifetime of a link, seconds (60-86400). Default 1800 (30 minutes). */
  linkTtlSeconds?: number;
  /** Anyone may create an account at `/login/register` (verified by a mailed link). Default false. */
  registration?: boolean;
}

/** Resolved self-service settings. */
export interface SelfServiceSettings {
  readonly mailer: Mailer;
  readonly from: string | undefined;
  readonly linkTtlSeconds: number;
  readonly registration: boolean;
}

/**
 * Checks the options. @returns the settings, or null without `smtpUrl` (self-service mail off).
 * @throws RangeError naming the field (`selfService.smtpUrl`: an smtp: or smtps: URL;
 * `selfService.from`: an address; `selfService.linkTtlSeconds`: integer 60-86400).
 */
export function resolveSelfService(options: SelfServiceOptions | undefined): SelfServiceSettings | null {
  if (!options?.smtpUrl) return null;
  let url: URL;
  try {
    url = new URL(options.smtpUrl);
  } catch {
    throw new RangeError('selfService.smtpUrl: an smtp: or smtps: URL');
  }
  if (url.protocol !== 'smtp:' && url.protocol !== 'smtps:')
    throw new RangeError('selfService.smtpUrl: an smtp: or smtps: URL');
  if (options.from !== undefined && !/^[^\s@<>]+@[^\s@<>]+$/.test(options.from))
    throw new RangeError('selfService.from: an e-mail address local@domain');
  const ttl = options.linkTtlSeconds ?? 1800;
  if (!Number.isSafeInteger(ttl) || ttl < 60 || ttl > 86400)
    throw new RangeError('selfService.linkTtlSeconds: integer 60-86400 (seconds)');
  return {
    mailer: new Mailer(options.smtpUrl),
    from: options.from,
    linkTtlSeconds: ttl,
    registration: options.registration === true,
  };
}

/** One plain-text message. */
export interface Mail {
  readonly from: string;
  readonly to: string;
  readonly subject: string;
  readonly text: string;
}

/** Sends mail through one SMTP transport (connections are opened per message). */
export class Mailer {
  readonly #transport: Transporter;

  /** @param smtpUrl `smtp:`/`smtps:` URL (see the module comment). */
  constructor(smtpUrl: string) {
    this.#transport = nodemailer.createTransport(smtpUrl);
  }

  /** Sends `mail`. @throws the transport's error (connection refused, rejected recipient, …). */
  async send(mail: Mail): Promise<void> {
    await this.#transport.sendMail({ ...mail });
  }

  /** Closes pooled connections (none unless the URL asks for a pool). */
  close(): void {
    this.#transport.close();
  }
}
