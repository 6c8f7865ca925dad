// Debian's headless chromium driven by playwright-core, as the browser tests launch it.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

export const CHROMIUM = '/usr/bin/chromium';
export const FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

// playwright-core's `chromium` from DEPS/node_modules; calls skip(reason) when chromium or the
// package is missing.
export function chromiumOrSkip(deps, skip) {
  if (!fs.existsSync(CHROMIUM)) skip(`${CHROMIUM} not found (Debian package chromium; run scripts/install-deps.sh)`);
  try {
    return createRequire(path.join(path.resolve(deps), 'index.js'))('playwright-core').chromium;
  } catch {
    return skip(`playwright-core not installed in ${deps}/node_modules (run scripts/fetch-test-assets.sh)`);
  }
}
