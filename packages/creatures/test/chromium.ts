/** Locating a Chromium for the explorer's browser test. */
import { existsSync } from 'node:fs';

/** Paths where Debian/Ubuntu packages put Chromium; `CHROMIUM_PATH` is tried first. */
export const CHROMIUM_CANDIDATES = [
  '/usr/bin/chromium',
  '/usr/bin/chromium-browser',
  '/usr/bin/google-chrome',
];

/** The path of an installed Chromium, or `undefined` when there is none. */
export function findChromium(): string | undefined {
  const env = process.env.CHROMIUM_PATH;
  return [...(env ? [env] : []), ...CHROMIUM_CANDIDATES].find((p) => existsSync(p));
}
