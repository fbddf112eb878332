// The package as a JavaScript developer gets it: `npm install` the built pkg/web into a fresh app,
// paste the README quick start, click Pay once, get one order, even while the server fails requests
// and drops answers after committing.
//
//   vite-app  tests/package/vite-app: a fresh Vite app (vite pinned in its package.json/lockfile,
//             "idempotent-fetch": "file:../../../pkg/web"); `npm ci` when node_modules is missing, then
//             `vite build` into a temporary folder.
//   plain     tests/package/plain: a plain ES-module page (no bundler, an import map for the bare
//             specifier) copied to a temporary folder, where `npm install` installs the tarball that
//             `npm pack pkg/web` makes: exactly the files the registry would ship.
//
// Each page is served by the reference server (--www), opened in a real browser (IF_BROWSER:
// chromium, firefox, webkit; tests/support/browsers.mjs); faults are turned on; the test clicks Pay and waits for the page to say it is paid, then checks the server holds
// exactly one new order, carrying the key the page showed, and that every POST carried that key.
//
// Needs: pkg/web (built here with `cargo xtask build` when missing), the reference
// server (IF_SERVER_BIN or target/server/idempotent-fetch-server; built with cargo when missing:
// tests/support/reference-server.mjs), the engine's browser and driver (tests/support/browsers.mjs)
// and the npm registry for the first `npm ci` of the Vite app.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";

import { capabilities, collectPageErrors, engineName, launchBrowser, timeoutScale } from "../support/browsers.mjs";
import { startInjectProxy } from "../support/inject-proxy.mjs";
import { root } from "../support/paths.mjs";
import { serverBinary, startReferenceServer } from "../support/reference-server.mjs";

const pkgDir = path.join(root, "pkg/web");
const viteApp = path.join(root, "tests/package/vite-app");
const plainSrc = path.join(root, "tests/package/plain");
const ACCOUNT = "acct_42"; // main.js: namespace; the server account of the context's session cookie
const TEST_TIMEOUT_MS = 180_000 * timeoutScale;

const log = (message) => console.log(`package: ${message}`);
let tmpDir;
let browser;

/** Runs a command, printing what it runs and how long it took; throws with its output on failure. */
function run(command, args, { cwd = root, env } = {}) {
  const started = Date.now();
  log(`${path.relative(root, cwd) || "."}$ ${command} ${args.join(" ")}`);
  const result = spawnSync(command, args, { cwd, env: { ...process.env, ...env }, encoding: "utf8", maxBuffer: 64 << 20 });
  if (result.error) throw new Error(`${command}: ${result.error.message}`);
  if (result.status !== 0) {
    throw new Error(`${command} ${args.join(" ")} failed (${result.status}) in ${cwd}\n${result.stdout}\n${result.stderr}`.trim());
  }
  log(`  done in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  return result.stdout;
}

function ensurePackage() {
  if (existsSync(path.join(pkgDir, "idempotent_fetch.js"))) return;
  log("pkg/web is missing: building it");
  run("cargo", ["xtask", "build"]);
}

/** `npm ci` in the Vite app unless its node_modules matches its lockfile already. */
function ensureViteAppInstalled() {
  const marker = path.join(viteApp, "node_modules/.package-lock.json");
  const lock = path.join(viteApp, "package-lock.json");
  const fresh = existsSync(marker) && existsSync(path.join(viteApp, "node_modules/.bin/vite"))
    && statSync(marker).mtimeMs >= statSync(lock).mtimeMs;
  if (fresh) return;
  log("installing the Vite app's dependencies from the npm registry (npm ci); this takes a few seconds");
  run("npm", ["ci", "--no-audit", "--no-fund"], { cwd: viteApp });
}

const ordersOf = async (server) => (await server.api("/api/orders", { account: ACCOUNT })).orders;

/**
 * Opens `server`'s page in a fresh browser context (empty storage), turns `faults` on, clicks Pay
 * (again, as the README's "Try again" says, if a send ran out of attempts) and checks one order.
 */
async function payOnce(server, faults, label, { loseFirstAnswer = false } = {}) {
  const context = await browser.newContext();
  const cleanups = [];
  await server.signIn(context, ACCOUNT); // the page's requests carry its session cookie
  try {
    const page = await context.newPage();
    const errors = collectPageErrors(page);
    const posts = [];
    let origin = server.url;
    if (!capabilities.network) {
      // No request events or routes over WebDriver: a proxy in front of the server sees every POST's
      // key and every 404, and loses the first answer by resetting the browser's connection.
      let lost = !loseFirstAnswer;
      const isOrder = ({ method, path: p }) => method === "POST" && p === "/api/orders";
      const proxy = await startInjectProxy({
        target: server.url,
        observe: (r) => { if (isOrder(r)) posts.push(r.headers["idempotency-key"]); },
        answered: (r) => { if (r.status === 404) errors.push(`404 ${r.path}`); },
        loseAnswer: (r) => (!lost && isOrder(r) ? (lost = true) : false),
      });
      cleanups.push(() => proxy.close());
      origin = proxy.url;
    }
    // Under faults Chromium logs every 503 and dropped answer ("Failed to load resource"): expected.
    // Anything else logged as an error, and any 404 (a file the page needs, e.g. the wasm), is not.
    if (capabilities.network) page.on("console", (message) => {
      if (message.type() === "error" && !message.text().startsWith("Failed to load resource")) errors.push(`console: ${message.text()}`);
    });
    if (capabilities.network) page.on("response", (response) => { if (response.status() === 404) errors.push(`404 ${response.url()}`); });
    if (capabilities.network) page.on("request", (request) => {
      if (request.method() === "POST" && new URL(request.url()).pathname === "/api/orders") posts.push(request.headers()["idempotency-key"]);
    });
    if (loseFirstAnswer && capabilities.network) {
      // The first POST reaches the server (which commits the order and answers), then the page gets
      // a connection reset instead of that answer: the library itself must retry with the same key.
      let lost = false;
      await page.route("**/api/orders", async (route) => {
        if (route.request().method() !== "POST" || lost) return route.continue();
        lost = true;
        await route.fetch();
        await route.abort("connectionreset");
      });
    }
    await page.goto(`${origin}/`);
    await page.waitForFunction(() => document.body.dataset.ready === "true", null, { timeout: 20_000 })
      .catch((error) => { throw new Error(`${label}: the page never became ready (init failed?)\n${errors.join("\n")}\n${error.message}`); });

    const before = await ordersOf(server);
    await server.setFaults(faults);

    let result;
    let clicks = 0;
    const keys = new Set();
    do {
      clicks += 1;
      await page.click("#pay");
      await page.waitForFunction(() => document.body.dataset.result && document.body.dataset.result !== "pending", null, { timeout: 150_000 });
      result = await page.evaluate(() => ({ ...document.body.dataset, status: document.getElementById("status").textContent }));
      keys.add(result.key);
      if (result.result === "try-again") {
        log(`${label}: a send ran out of attempts (${result.status}); clicking "Try again" as the user would`);
        await page.evaluate(() => { document.body.dataset.result = "pending"; });
      }
    } while (result.result === "try-again" && clicks < 4);
    await server.setFaults({});

    assert.deepEqual(errors, [], `${label}: errors on the page`);
    assert.equal(result.result, "paid", `${label}: the page says ${JSON.stringify(result.status)}`);
    assert.equal(keys.size, 1, `${label}: every click used the same key`);
    const key = result.key;
    assert.match(key, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/, `${label}: UUID v4 key`);
    assert.ok(posts.length >= 1, `${label}: the page sent POST /api/orders`);
    assert.deepEqual([...new Set(posts)], [key], `${label}: every POST carried the key the page shows`);

    const after = await ordersOf(server);
    const added = after.filter((order) => !before.some((old) => old.id === order.id));
    assert.equal(added.length, 1, `${label}: one click made ${added.length} orders`);
    assert.equal(added[0].idempotencyKey, key, `${label}: the order carries the page's key`);
    assert.equal(added[0].id, result.orderId, `${label}: the receipt shows the order the server holds`);
    assert.deepEqual(added[0].items.map(({ sku, qty }) => ({ sku, qty })), [{ sku: "mug", qty: 2 }]);
    log(`${label}: ${clicks} click(s), ${posts.length} POST(s) with key ${key}, replayed=${result.replayed}, order ${added[0].id}`);
    return { posts: posts.length, replayed: result.replayed };
  } finally {
    await context.close().catch(() => {});
    for (const cleanup of cleanups) await cleanup().catch(() => {});
  }
}

/** Both fault scenarios on one served page. */
async function checkPage(www, name) {
  const server = await startReferenceServer({ www, label: `package-${name}` });
  try {
    // Deterministic: the server commits every order, then closes the connection without answering.
    // The retry with the same key gets the stored answer (replayed), not a second order. (Chromium
    // itself may re-send a POST whose reused keep-alive connection closed without a byte, before the
    // library sees an error: either way the same key reaches the server again.)
    const dropped = await payOnce(server, { dropAfterCommit: 1 }, `${name}, the server drops every answer after commit`);
    assert.equal(dropped.replayed, "true", `${name}: the answer came from the server's replay`);
    // Deterministic, through the library's own retry: the page loses the first answer (reset).
    const reset = await payOnce(server, {}, `${name}, the first answer reset after commit`, { loseFirstAnswer: true });
    assert.ok(reset.posts >= 2, `${name}: the library retried the lost answer`);
    assert.equal(reset.replayed, "true", `${name}: the retry got the server's replay`);
    // Random: half the requests fail before the work (503), half the committed ones lose their answer.
    await payOnce(server, { failBeforeWork: 0.5, dropAfterCommit: 0.5 }, `${name}, 50% 503 + 50% lost answers`);
  } finally {
    await server.stop();
  }
}

before(async () => {
  browser = await launchBrowser({ what: `the package tests in ${engineName}` });
  ensurePackage();
  serverBinary(); // builds it now when missing, not inside a test's timeout
  tmpDir = mkdtempSync(path.join(os.tmpdir(), "if-package-"));
});

after(async () => {
  await browser?.close();
  if (tmpDir) rmSync(tmpDir, { recursive: true, force: true });
});

test("Vite app: npm ci + vite build of the README quick start, one click is one order under faults", { timeout: TEST_TIMEOUT_MS }, async () => {
  ensureViteAppInstalled();
  const installed = path.join(viteApp, "node_modules/idempotent-fetch");
  assert.ok(existsSync(path.join(installed, "idempotent_fetch.js")), "npm installed idempotent-fetch from pkg/web");

  const dist = path.join(tmpDir, "vite-dist");
  run(path.join(viteApp, "node_modules/.bin/vite"), ["build", "--outDir", dist, "--emptyOutDir", "--logLevel", "warn"], { cwd: viteApp });

  // The wasm must be an emitted asset that the bundle fetches (Vite rewrites
  // `new URL("idempotent_fetch_bg.wasm", import.meta.url)`), not left pointing into node_modules.
  const assets = readdirSync(path.join(dist, "assets"));
  const wasm = assets.filter((file) => file.endsWith(".wasm"));
  assert.equal(wasm.length, 1, `one .wasm asset in dist/assets: ${assets.join(", ")}`);
  assert.deepEqual(readFileSync(path.join(dist, "assets", wasm[0])), readFileSync(path.join(pkgDir, "idempotent_fetch_bg.wasm")),
    "the emitted wasm is pkg/web's");
  const bundle = assets.filter((file) => file.endsWith(".js")).map((file) => readFileSync(path.join(dist, "assets", file), "utf8")).join("\n");
  assert.ok(bundle.includes(wasm[0]), "the bundle refers to the emitted wasm by its hashed name");
  assert.ok(!bundle.includes("node_modules"), "the bundle does not refer to node_modules");

  await checkPage(dist, "vite");
});

test("plain ES modules: npm install of the packed pkg/web, import map, one click is one order under faults", { timeout: TEST_TIMEOUT_MS }, async () => {
  // npm pack: the tarball holds what publishing would ship (package.json "files").
  const packDir = path.join(tmpDir, "pack");
  mkdirSync(packDir);
  const packed = JSON.parse(run("npm", ["pack", pkgDir, "--json", "--pack-destination", packDir]));
  const shipped = packed[0].files.map((file) => file.path).sort();
  for (const needed of ["idempotent_fetch.js", "idempotent_fetch_bg.wasm", "idempotent_fetch.d.ts", "package.json"]) {
    assert.ok(shipped.includes(needed), `the packed package ships ${needed}: ${shipped.join(", ")}`);
  }
  const tarball = path.join(packDir, packed[0].filename);

  const app = path.join(tmpDir, "plain");
  mkdirSync(app);
  for (const file of ["index.html", "main.js", "package.json"]) copyFileSync(path.join(plainSrc, file), path.join(app, file));
  // A tarball without dependencies: nothing is fetched from the registry.
  run("npm", ["install", "--no-audit", "--no-fund", "--offline", tarball], { cwd: app });
  assert.ok(existsSync(path.join(app, "node_modules/idempotent-fetch/idempotent_fetch_bg.wasm")), "npm installed the wasm");

  await checkPage(app, "plain");
});
