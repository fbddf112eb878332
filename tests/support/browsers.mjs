// One browser API for the Node test runners, in three engines: IF_BROWSER=chromium (default) |
// firefox | webkit. A test file imports this module and runs unchanged in each; `cargo xtask test`
// runs every file that imports it once per engine.
//
//   Chromium  playwright-core against Debian's chromium (tests/support/chromium.mjs): the objects
//             returned are Playwright's own (Browser, BrowserContext, Page), so CDP is there too.
//   Firefox   selenium-webdriver (W3C WebDriver classic) against geckodriver + Debian firefox-esr
//   WebKit    selenium-webdriver against WebKitGTK's WebKitWebDriver + MiniBrowser on a private Xvfb
//             display (MiniBrowser has no headless mode)
//
// For Firefox and WebKit this module implements the subset of Playwright's API the tests use
// (tests/support/webdriver-page.mjs): browser.newContext() (a new WebDriver session = a new
// profile: fresh storage), context.newPage() (a new window of that session: same storage, locks
// and service workers, as tabs of one profile), page.goto/reload/url/evaluate(fn, arg)/
// waitForFunction/click/dblclick/locator(sel).textContent|getAttribute|isVisible|isDisabled/
// waitForSelector/waitForTimeout/screenshot/close, context.addInitScript (through an injecting
// proxy: tests/support/inject-proxy.mjs), context.setOffline (Firefox: its real offline mode;
// WebKit: not available, `capabilities.offline` is false). Page errors: collectPageErrors(page).
//
// What only Chromium has (CDP sessions, request interception, request/response/console events) is
// guarded in the tests by `capabilities` below.
//
// Test pages that load the package (pkg/index.js) (tests/browser/cases.html, tests/workers/page.html,
// tests/fault/bad-input.html, tests/tabs/index.html) set window.__ready or window.__initError;
// openLibPage() waits for that. A page runs a case with tests/support/page.mjs's outcomeOf() and the
// runner turns a failed outcome into a test failure with throwPageFailure().
import { launchChromium } from "./chromium.mjs";
import { requirePrerequisites } from "./paths.mjs";


export const ENGINES = ["chromium", "firefox", "webkit"];

/** The engine this process tests: IF_BROWSER, default chromium. */
export const engine = (() => {
  const name = (process.env.IF_BROWSER || "chromium").toLowerCase();
  if (!ENGINES.includes(name)) throw new Error(`IF_BROWSER=${name}: expected one of ${ENGINES.join(", ")}`);
  return name;
})();

/** Display name for test titles and messages. */
export const engineName = { chromium: "Chromium", firefox: "Firefox", webkit: "WebKit" }[engine];

/** What the engine's driver can do (the tests skip or adapt what is false, saying why). */
export const capabilities = {
  /** Chrome DevTools Protocol: context.newCDPSession (stop service workers, quota override). */
  cdp: engine === "chromium",
  /** page.route / page.on("request" | "response" | "console"): Playwright's network events. */
  network: engine === "chromium",
  /** context.setOffline: navigator.onLine false, online/offline events, requests fail. */
  offline: engine !== "webkit",
  /** Errors thrown while the page loads (before the runner attaches) reach collectPageErrors. */
  loadErrors: engine === "chromium",
};

/**
 * Multiply per-test timeouts by this: in Firefox and WebKit every new context starts a driver and a
 * browser process (seconds, more on a loaded machine), where Chromium opens a context in-process.
 */
export const timeoutScale = engine === "chromium" ? 1 : 3;

/** Why context.setOffline is missing in this engine (null when it works). */
export const offlineUnsupported = capabilities.offline
  ? null
  : "WebKitGTK's WebDriver has no command to take the browser offline (no CDP, no BiDi, no chrome context), so navigator.onLine cannot be made false from the test";

/** Launches the engine selected by IF_BROWSER. `what`/`also` as in launchChromium. */
export async function launchBrowser({ what = `the ${engineName} tests`, also = [] } = {}) {
  if (engine === "chromium") {
    const browser = await launchChromium({ what, also });
    browser.engine = engine;
    return browser;
  }
  const { launchWebDriverBrowser, webDriverMissing } = await import("./webdriver-page.mjs");
  requirePrerequisites(what, [...also, ...webDriverMissing(engine)]);
  return launchWebDriverBrowser(engine);
}

/** Collects the page's uncaught errors (stack strings) into `sink`; returns `sink`. */
export function collectPageErrors(page, sink = []) {
  if (engine === "chromium") page.on("pageerror", (error) => sink.push(String(error?.stack ?? error)));
  else page.onPageError((error) => sink.push(error));
  return sink;
}

/** Waits for a test page that loads the package: resolves on window.__ready, throws on window.__initError. */
export async function waitForLibPage(page, { timeout = 20_000 } = {}) {
  await page.waitForFunction(() => window.__ready || window.__initError, null, { timeout });
  const initError = await page.evaluate(() => window.__initError);
  if (initError) throw new Error(`the page could not load the package: ${initError}`);
}

/** page.goto(url), then waitForLibPage. */
export async function openLibPage(page, url, options) {
  await page.goto(url);
  await waitForLibPage(page, options);
}

/** Throws for a failed outcome of tests/support/page.mjs's outcomeOf(): the page's message, code and stack. */
export function throwPageFailure(outcome, name = "BrowserCaseFailure") {
  if (outcome.ok) return;
  const error = new Error(`${outcome.message}${outcome.code ? ` [${outcome.code}]` : ""}\n--- in the page:\n${outcome.stack ?? ""}`);
  error.name = name;
  throw error;
}
