// Bench pages that measure themselves: headless Chromium started by itself on a URL of the bench's
// loopback server, no debugger attached (no DevTools protocol client: with one, Chromium records the
// JavaScript stack of every request and V8 re-parses the functions on it, ~1.7 ms per fetch, which
// flattens every ratio). Each page times itself with performance.now() and navigation timing and
// POSTs its figures to the server; the bench awaits them.
//
//   reports()                   the server side: handle(req, res) for POST /report/<name>, and
//                               next(name) resolving to the JSON body posted under that name (a page's
//                               POST /report/error rejects every wait with the page's message)
//   REPORT_SCRIPT               the page side (a classic script's source, put before the page's
//                               module: it sees the module's errors, a syntax error included):
//                               report(name, figures) and error handlers that report to /report/error
//   openChromium(url, {cdp})    Chromium on `url`: by itself in a fresh profile (deleted at close), or,
//                               with cdp, driven by playwright-core (the optional second column);
//                               returns { version, close() }
//
// Needs Chromium at CHROMIUM_PATH (and tools/node_modules' playwright-core for cdp).
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import { join } from "node:path";

import { CHROMIUM_ARGS, chromiumMissing, chromiumPath, launchChromium } from "../../tests/support/chromium.mjs";

/** The server side of the pages' reports. */
export function reports({ timeoutMs = 30 * 60_000 } = {}) {
  const slots = new Map();
  const slot = (name) => {
    if (!slots.has(name)) {
      let resolve;
      const promise = new Promise((r) => (resolve = r));
      slots.set(name, { promise, resolve });
    }
    return slots.get(name);
  };
  const failed = slot("error").promise.then((message) => Promise.reject(new Error(`a bench page failed: ${message}`)));
  failed.catch(() => {});
  return {
    /** True when `req` was a report (answered here). */
    handle(req, res, url) {
      const m = url.pathname.match(/^\/report\/([\w.-]+)$/);
      if (!m || req.method !== "POST") return false;
      let body = "";
      req.setEncoding("utf8");
      req.on("data", (chunk) => (body += chunk));
      req.on("end", () => {
        res.writeHead(204, { "cache-control": "no-store" }).end();
        slot(m[1]).resolve(m[1] === "error" ? body : JSON.parse(body));
      });
      return true;
    },
    /** The figures a page posts under `name`. */
    next(name) {
      let timer;
      const timeout = new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no report "${name}" within ${timeoutMs / 1000} s`)), timeoutMs);
      });
      return Promise.race([slot(name).promise, failed, timeout]).finally(() => clearTimeout(timer));
    },
  };
}

/** A classic script's source for a page: `report(name, figures)` posts them (and resolves once sent). */
export const REPORT_SCRIPT = `
var report = (name, figures) => fetch("/report/" + name, { method: "POST", body: JSON.stringify(figures) });
var fail = (e) => fetch("/report/error", { method: "POST", body: String(e?.stack ?? e?.reason?.stack ?? e?.reason ?? e?.message ?? e) });
addEventListener("error", fail);
addEventListener("unhandledrejection", fail);
`;

/** The Chromium binary's version line (for the tables' headers). */
export function chromiumVersion() {
  const r = spawnSync(chromiumPath(), ["--version"], { encoding: "utf8" });
  return r.status === 0 ? r.stdout.trim() : "Chromium (version unknown)";
}

/**
 * Opens `url` in headless Chromium. Without `cdp`: the binary started by itself with the flags of
 * webdriver.json in a fresh profile directory, no debugger attached; `close()` ends it and deletes the
 * profile. With `cdp`: playwright-core's launch (a DevTools protocol client attached).
 */
export async function openChromium(url, { cdp = false, what = "the benchmark" } = {}) {
  if (cdp) {
    const browser = await launchChromium({ what });
    const page = await (await browser.newContext()).newPage();
    await page.goto(url);
    return { version: `${browser.version()}, driven by playwright-core (CDP attached)`, close: () => browser.close() };
  }
  const missing = chromiumMissing().filter((m) => !m.includes("playwright-core"));
  if (missing.length) throw new Error(`cannot run ${what}:\n  ${missing.join("\n  ")}`);
  const profile = mkdtempSync(join(os.tmpdir(), "if-bench-profile-"));
  // Its own process group, so that close() ends its helper processes too (they write to the profile).
  const chromium = spawn(chromiumPath(), [...CHROMIUM_ARGS, `--user-data-dir=${profile}`, url], { stdio: ["ignore", "ignore", "pipe"], detached: true });
  const kill = () => {
    try {
      process.kill(-chromium.pid, "SIGTERM");
    } catch {
      // the group is gone already
    }
  };
  const removeProfile = async () => {
    for (let i = 0; i < 50; i++) {
      try {
        return rmSync(profile, { recursive: true, force: true });
      } catch {
        await new Promise((r) => setTimeout(r, 100)); // a helper process still writing: try again
      }
    }
    console.error(`could not remove Chromium's profile ${profile}`);
  };
  let stderr = "";
  chromium.stderr.on("data", (chunk) => (stderr = (stderr + chunk).slice(-4000)));
  const exited = new Promise((done) => chromium.once("exit", done));
  let closing = false;
  // Ctrl-C or a kill during a run still ends Chromium and removes the profile.
  const onSignal = async (signal) => {
    kill();
    await removeProfile();
    process.exit(signal === "SIGINT" ? 130 : 143);
  };
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  exited.then((code) => {
    if (!closing) console.error(`Chromium exited early (${code}); its last output:\n${stderr}`);
  });
  return {
    version: `${chromiumVersion()}, started by itself (no debugger attached)`,
    async close() {
      closing = true;
      process.off("SIGINT", onSignal);
      process.off("SIGTERM", onSignal);
      kill();
      await exited; // before its profile directory is removed
      await removeProfile();
    },
  };
}
