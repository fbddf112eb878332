// Headless Chromium for the Node test runners, driven by playwright-core (never a downloaded browser).
//
//   playwrightCoreEntry()   env IF_PLAYWRIGHT_CORE (set by the xtask), else
//                           tools/node_modules/playwright-core/index.mjs (`cd tools && npm ci`)
//   chromiumPath()          env CHROMIUM_PATH (set by the xtask's installer, which alone knows the
//                           browser's names; by hand: CHROMIUM_PATH=/usr/bin/chromium), else null
//   chromiumMissing()       what is missing to launch it, as "do this" messages ([] when ready)
//   launchChromium()        chromium.launch() with CHROMIUM_ARGS; throws one clear error listing
//                           what is missing (plus `also` prerequisites of the caller) instead
//   CHROMIUM_ARGS           headless, no sandbox (root in CI), no GPU, no background traffic, no QUIC:
//                           the flags of webdriver.json, which wasm-pack test reads too
//
// Test files do not import this module: they use tests/support/browsers.mjs, which launches Chromium
// through launchChromium() when IF_BROWSER is chromium (the default).
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

import { requirePrerequisites, root } from "./paths.mjs";

export const CHROMIUM_ARGS = JSON.parse(readFileSync(path.join(root, "webdriver.json"), "utf8"))["goog:chromeOptions"].args;

export function playwrightCoreEntry() {
  return process.env.IF_PLAYWRIGHT_CORE || path.join(root, "tools/node_modules/playwright-core/index.mjs");
}

/** CHROMIUM_PATH as given (even if it does not exist: chromiumMissing says so), else null. */
export function chromiumPath() {
  return process.env.CHROMIUM_PATH || null;
}

export function chromiumMissing() {
  const missing = [];
  const entry = playwrightCoreEntry();
  if (!existsSync(entry)) {
    missing.push(process.env.IF_PLAYWRIGHT_CORE
      ? `IF_PLAYWRIGHT_CORE=${entry} does not exist`
      : "playwright-core is not installed: run `cd tools && npm ci`");
  }
  const browser = chromiumPath();
  if (!browser) {
    missing.push("CHROMIUM_PATH is not set: run through `cargo xtask test` (it installs Chromium and sets it), or set it to a Chromium binary");
  } else if (!existsSync(browser)) {
    missing.push(`Chromium not found at CHROMIUM_PATH=${browser}: install it (\`cargo xtask install\`, or apt-get install -y chromium) or fix CHROMIUM_PATH`);
  }
  return missing;
}

/**
 * Launches headless Chromium. `what` names the caller in the error ("the Chromium tests"); `also`
 * lists the caller's own missing prerequisites (e.g. pkgMissing()), reported together.
 */
export async function launchChromium({ what = "the Chromium tests", also = [] } = {}) {
  requirePrerequisites(what, [...also, ...chromiumMissing()]);
  const { chromium } = await import(pathToFileURL(playwrightCoreEntry()).href);
  return chromium.launch({ executablePath: chromiumPath(), args: CHROMIUM_ARGS });
}
