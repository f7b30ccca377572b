/**
 * The WebAuthn relying party of this server (WebAuthn Level 3 §5.1.3 RP ID, §13.4.9 origin checks): by
 * default the RP ID is the issuer's host name and the one accepted origin is the issuer's origin; both can
 * be set (`oauth.mfa.passkeys`) when the login pages are served under another name than the issuer.
 */
import type { OAuthContext } from '../oauth/context.ts';

/** The RP as the ceremonies use it. */
export interface RelyingParty {
  /** RP ID: a host name (never an IP address), e.g. `auth.example.org` or `localhost`. */
  readonly rpId: string;
  /** Name shown by authenticators. */
  readonly rpName: string;
  /** Origins accepted in `clientDataJSON.origin`. */
  readonly origins: readonly string[];
}

/** The relying party now (the issuer may be set after `listen()`). */
export function relyingParty(ctx: OAuthContext): RelyingParty {
  const mfa = ctx.config.mfa;
  const issuer = new URL(ctx.config.issuer);
  return {
    rpId: mfa?.passkeys.rpId ?? issuer.hostname,
    rpName: mfa?.passkeys.rpName ?? mfa?.totpIssuer ?? 'seed',
    origins: mfa?.passkeys.origins ?? [issuer.origin],
  };
}
