// Firefox (geckodriver) and WebKit (WebKitWebDriver + MiniBrowser) behind the small part of
// Playwright's API the tests use; see tests/support/browsers.mjs for the list. W3C WebDriver
// classic through selenium-webdriver (tools/package.json), one driver process per context:
// geckodriver serves one session at a time, and a session is a profile (its own storage).
//
// Why the design is as it is:
// - A session runs one command at a time, and Execute Async Script blocks it until the script
//   ends. Two tabs must run concurrently (two tabs paying at once), so evaluate() starts the
//   function with a synchronous Execute Script, keeps its promise in the page
//   (window.__ifCalls[id]) and polls for the result: commands for other windows interleave.
// - Every command for a page first switches the session to the page's window; a per-session
//   queue keeps "switch + command" atomic when tests drive several pages at once.
// - Page errors: classic WebDriver has no events, so a collector (window error and
//   unhandledrejection listeners) is installed after every navigation and drained on each poll.
//   Errors thrown while the page loads, before it is installed, are not seen (documented).
// - addInitScript: no preload scripts in classic WebDriver (WebKitGTK has no BiDi), so a context
//   with init scripts loads pages through tests/support/inject-proxy.mjs, which puts the scripts
//   first in every HTML document of the proxied origin.
import { spawn } from "node:child_process";
import { existsSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import net from "node:net";
import path from "node:path";

import { root } from "./paths.mjs";
import { startInjectProxy } from "./inject-proxy.mjs";

const toolsRequire = createRequire(path.join(process.env.IF_TOOLS_DIR || path.join(root, "tools"), "package.json"));
const POLL_MS = 20;
const COMMAND_TIMEOUT_MS = 60_000;

function pathFromEnvOrPath(variable, names) {
  if (process.env[variable]) return process.env[variable];
  for (const dir of (process.env.PATH ?? "").split(path.delimiter)) {
    for (const name of names) if (dir && existsSync(path.join(dir, name))) return path.join(dir, name);
  }
  return null;
}

function minibrowserPath() {
  if (process.env.MINIBROWSER_PATH) return process.env.MINIBROWSER_PATH;
  for (const dir of ["/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib"]) {
    const candidate = path.join(dir, "webkit2gtk-4.1/MiniBrowser");
    if (existsSync(candidate)) return candidate;
  }
  return null;
}

const paths = {
  firefox: () => ({ browser: pathFromEnvOrPath("FIREFOX_PATH", ["firefox-esr", "firefox"]), driver: pathFromEnvOrPath("GECKODRIVER", ["geckodriver"]) }),
  webkit: () => ({ browser: minibrowserPath(), driver: pathFromEnvOrPath("WEBKIT_DRIVER", ["WebKitWebDriver"]), xvfb: pathFromEnvOrPath("XVFB_PATH", ["Xvfb"]) }),
};

/** What is missing to drive `engine`, as "do this" messages ([] when ready). */
export function webDriverMissing(engine) {
  const missing = [];
  try {
    toolsRequire.resolve("selenium-webdriver");
  } catch {
    missing.push("selenium-webdriver is not installed: run `cd tools && npm ci`");
  }
  const found = paths[engine]();
  const install = "`cargo xtask install`";
  if (engine === "firefox") {
    if (!found.browser) missing.push(`Firefox not found: ${install} (apt-get install -y firefox-esr) or set FIREFOX_PATH`);
    if (!found.driver) missing.push(`geckodriver not found: ${install} (cargo install geckodriver) or set GECKODRIVER`);
  } else {
    if (!found.driver) missing.push(`WebKitWebDriver not found: ${install} (apt-get install -y webkit2gtk-driver) or set WEBKIT_DRIVER`);
    if (!found.browser) missing.push(`MiniBrowser not found: ${install} (apt-get install -y webkit2gtk-driver) or set MINIBROWSER_PATH`);
    if (!found.xvfb) missing.push(`Xvfb not found: ${install} (apt-get install -y xvfb) or set XVFB_PATH`);
  }
  return missing;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Driver and Xvfb processes die with this process, even when a test file fails before its after().
const children = new Set();
process.on("exit", () => { for (const child of children) child.kill(); });
function track(child) {
  children.add(child);
  child.on("exit", () => children.delete(child));
  return child;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** A private X display for MiniBrowser: Xvfb picks a free display number and writes it to fd 3. */
async function startXvfb(xvfb) {
  const child = track(spawn(xvfb, ["-displayfd", "3", "-screen", "0", "1280x1024x24", "-nolisten", "tcp"], { stdio: ["ignore", "ignore", "pipe", "pipe"] }));
  let stderr = "";
  child.stderr.on("data", (chunk) => { stderr += chunk; });
  const display = await new Promise((resolve, reject) => {
    let text = "";
    const timer = setTimeout(() => reject(new Error(`Xvfb printed no display within 15 s: ${stderr}`)), 15_000);
    child.stdio[3].on("data", (chunk) => {
      text += chunk;
      if (text.includes("\n")) { clearTimeout(timer); resolve(`:${text.trim()}`); }
    });
    child.on("exit", (code) => { clearTimeout(timer); reject(new Error(`Xvfb exited (${code}): ${stderr}`)); });
  });
  return { display, stop: () => child.kill() };
}

/** Starts a driver process on a free port and waits until GET /status answers. */
async function startDriver(engine, env) {
  const found = paths[engine]();
  const port = await freePort();
  // geckodriver: its own BiDi WebSocket port too (the default 9222 would clash between contexts), and
  // --allow-system-access so that context.setOffline can reach Firefox's offline mode.
  const args = engine === "firefox"
    ? ["--port", String(port), "--host", "127.0.0.1", "--websocket-port", String(await freePort()), "--allow-system-access"]
    : [`--port=${port}`];
  const child = track(spawn(found.driver, args, { env: { ...process.env, ...env }, stdio: ["ignore", "ignore", "pipe"] }));
  let stderr = "";
  child.stderr.on("data", (chunk) => { stderr = (stderr + chunk).slice(-4000); });
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 20_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${found.driver} exited (${child.exitCode}): ${stderr}`);
    try {
      const response = await fetch(`${url}/status`);
      if (response.ok) break;
    } catch { /* not listening yet */ }
    if (Date.now() > deadline) { child.kill(); throw new Error(`${found.driver} did not answer on ${url} within 20 s: ${stderr}`); }
    await sleep(50);
  }
  return { url, child, stderr: () => stderr };
}

/** The new-session capabilities for `engine` (geckodriver makes and removes a fresh profile itself). */
function sessionCapabilities(engine, firefoxPrefs = {}) {
  const common = { pageLoadStrategy: "normal", timeouts: { script: COMMAND_TIMEOUT_MS, pageLoad: 60_000, implicit: 0 } };
  if (engine === "firefox") {
    return {
      browserName: "firefox",
      ...common,
      "moz:firefoxOptions": {
        binary: paths.firefox().browser,
        args: ["-headless"],
        prefs: {
          "network.manage-offline-status": false, // offline only when the test says so
          // Nothing at startup that a fresh profile would otherwise fetch or show (faster, and no
          // traffic beside the test's own).
          "browser.startup.homepage_override.mstone": "ignore",
          "browser.aboutwelcome.enabled": false,
          "browser.safebrowsing.malware.enabled": false,
          "browser.safebrowsing.phishing.enabled": false,
          "browser.safebrowsing.downloads.enabled": false,
          "browser.safebrowsing.update.enabled": false,
          "network.captive-portal-service.enabled": false,
          "network.connectivity-service.enabled": false,
          "app.normandy.enabled": false,
          "extensions.update.enabled": false,
          "browser.search.update": false,
          "browser.newtabpage.enabled": false,
          "browser.ping-centre.telemetry": false,
          ...firefoxPrefs,
          "browser.shell.checkDefaultBrowser": false,
          "datareporting.policy.dataSubmissionEnabled": false,
          "toolkit.telemetry.enabled": false,
          "app.update.auto": false,
          "browser.tabs.remote.autostart": true,
          // Background windows keep full-rate timers, as a visible tab has.
          "dom.min_background_timeout_value": 4,
          "dom.timeout.enable_budget_timer_throttling": false,
        },
      },
    };
  }
  return {
    browserName: "MiniBrowser",
    ...common,
    "webkitgtk:browserOptions": { binary: paths.webkit().browser, args: ["--automation"] },
  };
}

/** One W3C session with a queue, so "switch to window + command" pairs never interleave. */
class Session {
  constructor(driver, engine) {
    this.driver = driver;
    this.engine = engine;
    this.current = null;
    this.tail = Promise.resolve();
  }

  /** Runs `work(driver)` with the session switched to `handle` (null: any window), in order. */
  run(handle, work) {
    const next = this.tail.then(async () => {
      if (handle && this.current !== handle) {
        await this.driver.switchTo().window(handle);
        this.current = handle;
      }
      return work(this.driver);
    });
    this.tail = next.catch(() => {});
    return next;
  }
}

/** Installs the error collector in the page (idempotent): window.__ifErrors gets stack strings. */
const INSTALL_COLLECTOR = `
  if (!window.__ifErrors) {
    window.__ifErrors = [];
    window.addEventListener("error", (e) => window.__ifErrors.push(String(e.message) + (e.error?.stack ? "\\n" + e.error.stack : "")));
    window.addEventListener("unhandledrejection", (e) => window.__ifErrors.push("unhandled rejection: " + String(e.reason) + (e.reason?.stack ? "\\n" + e.reason.stack : "")));
  }`;

let callCounter = 0;

class Locator {
  constructor(page, selector) {
    this.page = page;
    this.selector = selector;
  }

  query(body) {
    const { css, nth } = parseSelector(this.selector);
    return this.page.evaluate(new Function("[css, nth]", `const el = document.querySelectorAll(css)[nth]; ${body}`), [css, nth]);
  }

  textContent() { return this.query("return el ? el.textContent : null;"); }
  getAttribute(name) { return this.query(`return el ? el.getAttribute(${JSON.stringify(name)}) : null;`); }
  isVisible() { return this.query(`return ${VISIBLE};`); }
  isDisabled() { return this.query("return !!el && el.disabled === true;"); }
}

const VISIBLE = `!!el && el.getClientRects().length > 0 && getComputedStyle(el).visibility !== "hidden"`;

/** Playwright's `css >> nth=N` form (the only non-CSS selector the tests use). */
function parseSelector(selector) {
  const match = /^(.*?)\s*>>\s*nth=(\d+)$/.exec(selector);
  return match ? { css: match[1], nth: Number(match[2]) } : { css: selector, nth: 0 };
}

class WebDriverPage {
  constructor(context, handle) {
    this._context = context;
    this.session = context.session;
    this.handle = handle;
    this._url = "about:blank";
    this.closed = false;
    this.errorSinks = [];
  }

  context() { return this._context; }
  url() { return this._url; }
  onPageError(callback) { this.errorSinks.push(callback); }

  run(work) {
    if (this.closed) return Promise.reject(new Error("the page is closed"));
    return this.session.run(this.handle, work);
  }

  async drainErrors(driver) {
    const errors = await driver.executeScript("const e = window.__ifErrors ?? []; if (window.__ifErrors) window.__ifErrors = []; return e;").catch(() => []);
    for (const error of errors ?? []) for (const sink of this.errorSinks) sink(error);
  }

  async afterNavigation(driver) {
    this._url = await driver.getCurrentUrl();
    await driver.executeScript(INSTALL_COLLECTOR);
  }

  async goto(url) {
    const target = await this._context.routed(url);
    await this.run(async (driver) => {
      await this.drainErrors(driver);
      await this._context.setCookiesFor(driver, target);
      await driver.get(target);
      await this.afterNavigation(driver);
    });
  }

  async reload() {
    await this.run(async (driver) => {
      await this.drainErrors(driver);
      await driver.navigate().refresh();
      await this.afterNavigation(driver);
    });
  }

  /**
   * Runs `fn(arg)` in the page and returns its (awaited) result. The function's source is sent, so
   * like Playwright's it must not close over Node variables; `arg` must be JSON-serialisable.
   */
  async evaluate(fn, arg) {
    const id = `c${++callCounter}`;
    const start = `
      const __arg = arguments[0];
      const __id = arguments[1];
      ${INSTALL_COLLECTOR}
      window.__ifCalls = window.__ifCalls || {};
      let __value;
      try {
        __value = (${fn.toString()})(__arg);
      } catch (e) {
        return { state: "error", error: String(e && e.stack ? (String(e.stack).includes(String(e.message)) ? e.stack : e + "\\n" + e.stack) : e) };
      }
      if (__value && typeof __value.then === "function") {
        window.__ifCalls[__id] = { state: "pending" };
        __value.then(
          (value) => { window.__ifCalls[__id] = { state: "done", value: value === undefined ? null : value }; },
          (e) => { window.__ifCalls[__id] = { state: "error", error: String(e && e.stack ? e + "\\n" + e.stack : e) }; },
        );
        return { state: "pending" };
      }
      return { state: "done", value: __value === undefined ? null : __value };`;
    let answer = await this.run(async (driver) => {
      const first = await driver.executeScript(start, arg === undefined ? null : arg, id);
      if (first?.state !== "pending") await this.drainErrors(driver);
      return first;
    });
    while (answer?.state === "pending") {
      await sleep(POLL_MS);
      answer = await this.run(async (driver) => {
        await this.drainErrors(driver);
        return driver.executeScript(`
          const calls = window.__ifCalls;
          const call = calls && calls[arguments[0]];
          if (!call) return { state: "lost" };
          if (call.state !== "pending") delete calls[arguments[0]];
          return call;`, id);
      });
    }
    if (answer?.state === "lost") throw new Error("page.evaluate: the page navigated or closed before the function's promise settled");
    if (answer?.state === "error") throw new Error(`page.evaluate: ${answer.error}`);
    return answer?.value;
  }

  /** Polls `fn(arg)` until it returns a truthy value, or throws after `timeout` ms. Resolves, as
   *  Playwright's does, with a handle whose `jsonValue()` is that value. */
  async waitForFunction(fn, arg, { timeout = 30_000 } = {}) {
    const deadline = Date.now() + timeout;
    for (;;) {
      const value = await this.evaluate(fn, arg);
      if (value) return { jsonValue: async () => value };
      if (Date.now() > deadline) throw new Error(`page.waitForFunction: timeout ${timeout} ms exceeded waiting for ${fn.toString().slice(0, 200)}`);
      await sleep(50);
    }
  }

  async waitForSelector(selector, { timeout = 30_000 } = {}) {
    const { css, nth } = parseSelector(selector);
    await this.waitForFunction(new Function("[css, nth]", `const el = document.querySelectorAll(css)[nth]; return ${VISIBLE};`), [css, nth], { timeout });
  }

  waitForTimeout(ms) { return sleep(ms); }

  locator(selector) { return new Locator(this, selector); }

  /** Waits for the element to be visible and enabled, then a WebDriver Element Click (a real click). */
  async click(selector, { timeout = 30_000 } = {}) {
    const { css, nth } = parseSelector(selector);
    await this.waitForFunction(new Function("[css, nth]", `const el = document.querySelectorAll(css)[nth]; return ${VISIBLE} && !el.disabled;`), [css, nth], { timeout });
    const { By } = toolsRequire("selenium-webdriver");
    await this.run(async (driver) => {
      const elements = await driver.findElements(By.css(css));
      if (!elements[nth]) throw new Error(`page.click: no element ${selector}`);
      await elements[nth].click();
    });
  }

  /** Waits for the element like `click`, then a double click through WebDriver actions (two real
   *  clicks, as a user's double click on a button). */
  async dblclick(selector, { timeout = 30_000 } = {}) {
    const { css, nth } = parseSelector(selector);
    await this.waitForFunction(new Function("[css, nth]", `const el = document.querySelectorAll(css)[nth]; return ${VISIBLE} && !el.disabled;`), [css, nth], { timeout });
    const { By } = toolsRequire("selenium-webdriver");
    await this.run(async (driver) => {
      const elements = await driver.findElements(By.css(css));
      if (!elements[nth]) throw new Error(`page.dblclick: no element ${selector}`);
      await driver.actions().doubleClick(elements[nth]).perform();
    });
  }

  /** A PNG of the viewport (`fullPage` is not available over classic WebDriver). */
  async screenshot({ path: file } = {}) {
    // WebKit's screenshot is the last painted frame: let the latest DOM changes paint first.
    await this.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(() => setTimeout(resolve, 50)))));
    const base64 = await this.run((driver) => driver.takeScreenshot());
    const png = Buffer.from(base64, "base64");
    if (file) writeFileSync(file, png);
    return png;
  }

  /** Closes the window (its scripts stop, its Web Locks are released), like closing a tab. */
  async close() {
    if (this.closed) return;
    await this.session.run(null, async (driver) => {
      const handles = await driver.getAllWindowHandles();
      if (!handles.includes(this.handle)) return;
      await driver.switchTo().window(this.handle);
      await this.drainErrors(driver);
      if (handles.length === 1) {
        // The last window: closing it would end the session, so keep a blank one for the context.
        await driver.switchTo().newWindow("window");
        const blank = await driver.getWindowHandle();
        this._context.spare = blank;
        await driver.switchTo().window(this.handle);
      }
      await driver.close();
      this.session.current = null;
    });
    this.closed = true;
    this._context.pages.delete(this);
  }
}

class WebDriverContext {
  constructor(browser, session, driverProcess, cleanup) {
    this.browser = browser;
    this.session = session;
    this.driverProcess = driverProcess;
    this.cleanup = cleanup;
    this.pages = new Set();
    this.initScripts = [];
    this.proxies = new Map();
    this.spare = null; // the session's first (or last remaining) window, reused by the next newPage
    this.offline = false;
    this.cookies = []; // from addCookies, set in the browser before the first page of their host loads
  }

  /** Like Playwright's: [{ name, value, url, httpOnly?, sameSite? }], sent by every later page load. */
  async addCookies(cookies) {
    for (const cookie of cookies) this.cookies.push({ ...cookie, set: false });
  }

  /**
   * WebDriver adds a cookie only for the document's own host, so before the first navigation to a
   * host with pending cookies the window visits a URL of the cookie's own origin that is not the
   * page (/robots.txt; not through a proxy, which would count it), adds them, and then loads the
   * page with them. Cookies are per host, not per port: the same cookie also reaches an injecting
   * proxy on 127.0.0.1.
   */
  async setCookiesFor(driver, target) {
    if (!/^https?:/.test(target)) return;
    const url = new URL(target);
    const pending = this.cookies.filter((c) => !c.set && new URL(c.url).hostname === url.hostname);
    if (!pending.length) return;
    await driver.get(`${new URL(pending[0].url).origin}/robots.txt`);
    for (const cookie of pending) {
      await driver.manage().addCookie({ name: cookie.name, value: cookie.value, path: "/", httpOnly: cookie.httpOnly ?? false, sameSite: cookie.sameSite ?? "Lax" });
      cookie.set = true;
    }
  }

  async newPage() {
    const handle = await this.session.run(null, async (driver) => {
      if (this.spare) {
        const spare = this.spare;
        this.spare = null;
        return spare;
      }
      // From a live window: after a page.close() the session's current window is gone, and
      // geckodriver refuses New Window from a discarded browsing context.
      if (this.session.current === null) await driver.switchTo().window((await driver.getAllWindowHandles())[0]);
      await driver.switchTo().newWindow("window");
      const created = await driver.getWindowHandle();
      this.session.current = created;
      return created;
    });
    const page = new WebDriverPage(this, handle);
    this.pages.add(page);
    return page;
  }

  /** Like Playwright's: `fn` runs first in every document this context loads afterwards. */
  async addInitScript(fn) {
    this.initScripts.push(`(${fn.toString()})();`);
  }

  /** The URL to navigate to: through an injecting proxy when there are init scripts. */
  async routed(url) {
    if (!this.initScripts.length || !/^https?:/.test(url)) return url;
    const target = new URL(url);
    let proxy = this.proxies.get(target.origin);
    if (!proxy) {
      proxy = await startInjectProxy({ target: target.origin, scripts: () => this.initScripts });
      this.proxies.set(target.origin, proxy);
    }
    return `${proxy.url}${target.pathname}${target.search}${target.hash}`;
  }

  /** Firefox: its offline mode (navigator.onLine, online/offline events, failing requests). */
  async setOffline(offline) {
    if (this.browser.engine !== "firefox") throw new Error(`context.setOffline: ${this.browser.engine} has no way to go offline over WebDriver`);
    const { Command } = toolsRequire("selenium-webdriver/lib/command");
    await this.session.run(null, async (driver) => {
      await driver.execute(new Command("ifSetContext").setParameter("context", "chrome"));
      try {
        await driver.executeScript(`Services.io.manageOfflineStatus = false; Services.io.offline = ${offline ? "true" : "false"};`);
      } finally {
        await driver.execute(new Command("ifSetContext").setParameter("context", "content"));
      }
    });
    this.offline = offline;
  }

  async close() {
    if (this.closed) return;
    this.closed = true;
    try {
      await this.session.run(null, (driver) => driver.quit());
    } catch { /* the browser may be gone already */ }
    this.driverProcess.child.kill();
    for (const proxy of this.proxies.values()) await proxy.close().catch(() => {});
    this.cleanup();
    this.browser.contexts.delete(this);
  }
}

class WebDriverBrowser {
  constructor(engine, xvfb) {
    this.engine = engine;
    this.xvfb = xvfb;
    this.contexts = new Set();
  }

  /** A new WebDriver session: a fresh profile, as Playwright's browser.newContext() gives. */
  /** `firefoxPrefs`: extra Firefox preferences for this profile (ignored by WebKit). */
  async newContext({ viewport, firefoxPrefs } = {}) {
    const selenium = toolsRequire("selenium-webdriver");
    const http = toolsRequire("selenium-webdriver/http");
    const env = this.xvfb ? { DISPLAY: this.xvfb.display } : {};
    const driverProcess = await startDriver(this.engine, env);
    const cleanup = () => {};
    let driver;
    try {
      const executor = new http.Executor(new http.HttpClient(driverProcess.url));
      executor.defineCommand("ifSetContext", "POST", "/session/:sessionId/moz/context");
      const capabilities = new selenium.Capabilities(sessionCapabilities(this.engine, firefoxPrefs));
      driver = await selenium.WebDriver.createSession(executor, capabilities);
    } catch (error) {
      driverProcess.child.kill();
      cleanup();
      throw new Error(`cannot start a ${this.engine} session: ${error.message}\n${driverProcess.stderr()}`);
    }
    const session = new Session(driver, this.engine);
    const context = new WebDriverContext(this, session, driverProcess, cleanup);
    context.spare = await driver.getWindowHandle();
    if (viewport) await driver.manage().window().setRect({ width: viewport.width, height: viewport.height }).catch(() => {});
    this.contexts.add(context);
    return context;
  }

  /** The browser's version, as the driver reports it (for the README's support matrix). */
  async version() {
    const context = await this.newContext();
    try {
      const caps = await context.session.driver.getCapabilities();
      return `${caps.get("browserName")} ${caps.get("browserVersion")}`;
    } finally {
      await context.close();
    }
  }

  async close() {
    for (const context of [...this.contexts]) await context.close();
    this.xvfb?.stop();
  }
}

/** The Firefox or WebKit "browser": contexts are started on demand (one driver + session each). */
export async function launchWebDriverBrowser(engine) {
  const xvfb = engine === "webkit" ? await startXvfb(paths.webkit().xvfb) : null;
  return new WebDriverBrowser(engine, xvfb);
}

/** For a quick manual check: `node tests/support/webdriver-page.mjs firefox` prints the version. */
if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(new URL(import.meta.url).pathname)) {
  const browser = await launchWebDriverBrowser(process.argv[2] ?? "firefox");
  try {
    console.log(await browser.version());
  } finally {
    await browser.close();
  }
}
