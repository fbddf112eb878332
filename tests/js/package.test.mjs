// The package as a JavaScript developer gets it: `npm pack` of the built pkg/, that one tarball installed
// into a fresh app, the README quick start pasted in (tests/package/quick-start.js, copied as main.js:
// no init call), Pay clicked once, one order, even while the server fails requests and drops answers
// after committing.
//
//   vite-app     tests/package/vite-app: a fresh Vite app (vite pinned in its package.json/lockfile);
//                `npm ci` when its node_modules is missing or stale, the tarball installed with
//                `npm install --no-save`, then `vite build` into a temporary folder.
//   webpack-app  tests/package/webpack-app: webpack 5 with no plugins, loaders or experiments (its
//                webpack.config.cjs), same install, `webpack(config)` into a temporary folder.
//   rollup-app   tests/package/rollup-app: Rollup 4 with the two plugins its rollup.config.mjs names
//                (node-resolve, import-meta-assets: the README's line), same install, `rollup -c`.
//   parcel-app   tests/package/parcel-app: Parcel 2 with no .parcelrc, same install, `parcel build
//                index.html` with its cache in the temporary folder.
//   esbuild      the quick start bundled by esbuild (tools/), the .wasm copied next to the bundle as the
//                README says (esbuild does not emit `new URL(..., import.meta.url)` assets).
//   plain        tests/package/plain: a plain ES-module page (no bundler, an import map for the bare
//                specifier) copied to a temporary folder where the tarball is installed.
//   react-app    tests/package/react-app, vue-app, svelte-app: Vite's official react-ts, vue-ts and
//   vue-app      svelte-ts templates with a checkout on idempotent-fetch-client/react, /vue, /svelte; same
//   svelte-app   install, then the template's type check (`tsc -b`, `vue-tsc -b`, `svelte-check`)
//                and `vite build`, each driven the same way (driveCheckout): a double click while
//                every request 503s, a reload mid-retry, a reload that rebuilt another cart
//                (onMismatch "replace"), flaky faults and a reload after the answer.
//   tanstack-app tests/package/tanstack-app: the react-ts template with TanStack Query (persisted)
//                and a checkout mutation on idempotent-fetch-client/tanstack with TanStack's `retry: 3`:
//                the same faults and reloads, and Pay clicked again after the answer.
//   sw-app       tests/package/sw-app: Vite's vanilla template with a service worker built as the
//                README's recipe says (a second entry kept at /sw.js, idempotent-fetch-client/sw), same
//                install; `vite dev` answers /sw.js with HTML (as the README says), so `vite build`
//                and `vite preview` (the API proxied to the reference server); Chromium only (the sync event is a DevTools command): the tab
//                closed while the server is down, a sync event, one order with the page's key.
//   snippets     the npm page's shop.ts and its React, Vue, Svelte and TanStack Query snippets, taken
//                from the packed README (and found verbatim in the repository README), each pasted
//                into a copy of react-app, vue-app, svelte-app or tanstack-app with the page's cart
//                around it (tests/support/snippets.mjs), built with the template's own `npm run
//                build` (`svelte-check` first for Svelte), and driven through what the page must say:
//                idle, retrying (the countdown), paid, refused (a 400, a 401), and a reload that
//                rebuilt the cart with each way out (replace, resume, discard); a screenshot of each
//                state goes to IF_SCREENSHOT_DIR (default: a temporary folder, named in the log).
//   node         tests/package/node: `import` (pay.mjs) and `require` (pay.cjs) of the installed
//                package in Node, against the same server.
//
// Each page is served by the reference server (--www), opened in a real browser (IF_BROWSER:
// chromium, firefox, webkit; tests/support/browsers.mjs); faults are turned on; the test clicks Pay and waits for the page to say it is paid, then checks the server holds
// exactly one new order, carrying the key the page showed, and that every POST carried that key.
//
// Needs: the package (built here with `cargo xtask build` when pkg/ is missing), the reference
// server (IF_SERVER_BIN or target/server/idempotent-fetch-server; built with cargo when missing:
// tests/support/reference-server.mjs), the engine's browser and driver (tests/support/browsers.mjs)
// and the npm registry for the first `npm ci` of each bundler app.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import net from "node:net";
import os from "node:os";
import path from "node:path";

import { capabilities, collectPageErrors, engine, engineName, launchBrowser, timeoutScale } from "../support/browsers.mjs";
import { startInjectProxy } from "../support/inject-proxy.mjs";
import { packPackage } from "../support/packed.mjs";
import { pkgDir, pkgMissing, root } from "../support/paths.mjs";
import { serverBinary, startReferenceServer } from "../support/reference-server.mjs";
import { HARNESS, readSnippets, snippetApp } from "../support/snippets.mjs";

const apps = path.join(root, "tests/package");
const quickStart = path.join(apps, "quick-start.js");
/** One use of each part loaded on demand, appended to the quick start in every app. */
const partsProbe = path.join(apps, "parts-probe.js");
/** main.js of an app: the README quick start as pasted, then the parts probe. */
const writeMain = (app) => writeFileSync(path.join(app, "main.js"), readFileSync(quickStart, "utf8") + readFileSync(partsProbe, "utf8"));
const WASM = "idempotent_fetch_bg.wasm"; // package/build.mjs WASM_FILE
const ACCOUNT = "acct_42"; // quick-start.js: namespace; the server account of the context's session cookie
const TEST_TIMEOUT_MS = 180_000 * timeoutScale;

const log = (message) => console.log(`package: ${message}`);
let tmpDir;
let browser;
let tarball;

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
  if (!pkgMissing()) return;
  log("pkg/ is missing: building it (node package/build.mjs)");
  run(process.execPath, [path.join(root, "package/build.mjs")]);
}

/**
 * A bundler app of tests/package: `npm ci` unless its node_modules matches its lockfile, then the
 * packed tarball installed without touching package.json or the lockfile, and the quick start as main.js.
 */
function prepareApp(app, bin, { withQuickStart = true } = {}) {
  const marker = path.join(app, "node_modules/.package-lock.json");
  const lock = path.join(app, "package-lock.json");
  const fresh = existsSync(marker) && existsSync(path.join(app, "node_modules/.bin", bin))
    && statSync(marker).mtimeMs >= statSync(lock).mtimeMs;
  if (!fresh) {
    log(`installing ${path.basename(app)}'s dependencies from its lockfile (npm ci); this takes a few seconds`);
    run("npm", ["ci", "--no-audit", "--no-fund"], { cwd: app });
  }
  run("npm", ["install", "--no-save", "--no-audit", "--no-fund", "--offline", tarball], { cwd: app });
  assert.ok(existsSync(path.join(app, "node_modules/idempotent-fetch-client", WASM)), `npm installed the tarball into ${path.basename(app)}`);
  if (withQuickStart) writeMain(app);
}

/** Bundled output: the one emitted .wasm is the package's, and the JS refers to it, not to node_modules. */
function checkBundle(dir, label) {
  const files = readdirSync(dir, { recursive: true }).map(String);
  const wasm = files.filter((file) => file.endsWith(".wasm"));
  assert.equal(wasm.length, 1, `${label}: one .wasm emitted: ${files.join(", ")}`);
  assert.deepEqual(readFileSync(path.join(dir, wasm[0])), readFileSync(path.join(pkgDir, WASM)), `${label}: the emitted wasm is the package's`);
  const read = (ext) => files.filter((file) => file.endsWith(ext)).map((file) => readFileSync(path.join(dir, file), "utf8")).join("\n");
  const js = read(".js");
  // Parcel names it in the page's import map (the bundle has `import.meta.resolve` of the map's key).
  assert.ok((js + read(".html")).includes(path.basename(wasm[0])), `${label}: the bundle refers to the emitted wasm by its name`);
  assert.ok(!js.includes("node_modules"), `${label}: the bundle does not refer to node_modules`);
  // A bundler's build resolves no `development` condition: the production build, without the messages
  // in full (src/js/mode.ts; tests/js/builds.test.mjs compares the two builds' errors).
  assert.ok(js.includes("the development build of idempotent-fetch-client says more"), `${label}: the bundle holds the production build`);
  assert.ok(!js.includes("must be a whole number from"), `${label}: the bundle holds no development message`);
}

const ordersOf = async (server, account = ACCOUNT) => (await server.api("/api/orders", { account })).orders;

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
      .catch((error) => { throw new Error(`${label}: the page never became ready (the package failed to load?)\n${errors.join("\n")}\n${error.message}`); });

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
    // Each part loaded on demand, through the app's bundle (its chunks), works.
    const parts = await page.evaluate(() => window.__partsProbe());
    assert.equal(parts, "placement:local body:local indexeddb:indexeddb custom:custom", `${label}: the parts loaded on demand`);
    log(`${label}: ${clicks} click(s), ${posts.length} POST(s) with key ${key}, replayed=${result.replayed}, order ${added[0].id}; parts: ${parts}`);
    return { posts: posts.length, replayed: result.replayed };
  } finally {
    await context.close().catch(() => {});
    for (const cleanup of cleanups) await cleanup().catch(() => {});
  }
}

/**
 * A TypeScript user of the installed tarball under `module: node16`, from an ES module (.mts, `import`)
 * and from a CommonJS file (.cts, compiled to `require`): both must type-check against the package's
 * declarations (a CommonJS file may not use ESM declarations: TS1479).
 */
function typeCheckBothModuleFormats(app) {
  const use = `const client: IdempotentClient = new IdempotentClient({ namespace: "a", storage: "memory" });
const op: Promise<IdempotentOperation> = client.begin("pay", { url: "http://127.0.0.1/api/orders", method: "POST", body: "{}" });
export const code = (e: unknown): string | null => (isIdempotentFetchError(e) ? e.code : null);
void op;\n`;
  const names = "IdempotentClient, IdempotentOperation, isIdempotentFetchError";
  writeFileSync(path.join(app, "use.mts"), `import { ${names} } from "idempotent-fetch-client";\n${use}`);
  writeFileSync(path.join(app, "use.cts"), `import { ${names} } from "idempotent-fetch-client";\n${use}`);
  writeFileSync(path.join(app, "tsconfig.json"), JSON.stringify({
    compilerOptions: { module: "node16", moduleResolution: "node16", target: "es2022", lib: ["es2022", "dom"], types: [], strict: true, noEmit: true },
    files: ["use.mts", "use.cts"],
  }));
  run(path.join(root, "tools/node_modules/.bin/tsc"), ["-p", app]);
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
  // npm pack: the tarball holds what publishing would ship (package.json "files"). Every app installs it.
  const packDir = path.join(tmpDir, "pack");
  mkdirSync(packDir);
  const packed = packPackage(packDir);
  tarball = packed.tarball;
  const shipped = packed.files;
  log(`the tarball ships: ${shipped.join(", ")}`);
  const manifest = JSON.parse(readFileSync(path.join(pkgDir, "package.json"), "utf8"));
  const needed = new Set(["package.json", "README.md", "LICENSE-MIT", "LICENSE-APACHE", WASM, manifest.types]);
  // Every file the exports map points at (its values; its keys are subpaths such as "./react").
  const targets = (value) => (typeof value === "string" ? [value] : Object.values(value).flatMap(targets));
  for (const target of targets(manifest.exports)) needed.add(target);
  for (const target of Object.values(manifest.bin ?? {})) needed.add(target);
  for (const file of needed) {
    assert.ok(shipped.includes(file.replace(/^\.\//, "")), `the packed package ships ${file} (package.json names it): ${shipped.join(", ")}`);
  }
});

after(async () => {
  await browser?.close();
  if (tmpDir) rmSync(tmpDir, { recursive: true, force: true });
});

test("the npm page: the packed README says npm install and shows the quick start on its first screen; every link is absolute and every anchor exists in the repository README", async () => {
  const readme = readFileSync(path.join(pkgDir, "README.md"), "utf8");
  const firstScreen = readme.split("\n").slice(0, 40).join("\n");
  assert.match(firstScreen, /npm install idempotent-fetch-client/);
  assert.match(firstScreen, /## Quick start/);
  assert.match(firstScreen, /client\.begin\(/);
  for (const name of ["idempotent-fetch-client/react", "idempotent-fetch-client/vue", "idempotent-fetch-client/svelte", "idempotent-fetch-client/tanstack"]) {
    assert.ok(readme.includes(name), `the npm page shows ${name}`);
  }
  // Rust only where the page offers the reference server to try the package against.
  const tryIt = /\n## Try it against a server\n[\s\S]*?(?=\n## )/.exec(readme)?.[0] ?? "";
  assert.match(tryIt, /cargo run --profile server -p idempotent-fetch-server -- .*--enable-faults/, "the npm page says how to run a server to try it against");
  assert.match(tryIt, /proxy: \{ "\/api": "http:\/\/127\.0\.0\.1:8080" \}/, "and the Vite proxy line for it");
  assert.ok(!/cargo /.test(readme.replace(tryIt, "")), "no cargo command on the npm page but there");
  const repoReadme = readFileSync(path.join(root, "README.md"), "utf8");
  // GitHub's heading anchors: lower case, punctuation dropped, spaces to dashes.
  const anchors = new Set([...repoReadme.matchAll(/^#+ (.+)$/gm)].map(([, title]) => title.trim().toLowerCase().replace(/[^\w\- ]/g, "").replace(/ /g, "-")));
  const manifest = JSON.parse(readFileSync(path.join(pkgDir, "package.json"), "utf8"));
  const repo = manifest.repository.url.replace(/^git\+/, "").replace(/\.git$/, "");
  const links = [...readme.matchAll(/\]\(([^)]+)\)/g)].map(([, href]) => href);
  assert.ok(links.length > 0);
  for (const href of links) {
    assert.ok(href === repo || href.startsWith(`${repo}#`) || href.startsWith(`${repo}/tree/main/`), `an absolute link into the repository: ${href}`);
    if (href === repo) continue;
    if (href.includes("#")) assert.ok(anchors.has(href.split("#")[1]), `the repository README has the anchor of ${href}`);
    else assert.ok(existsSync(path.join(root, href.slice(`${repo}/tree/main/`.length))), `the repository has ${href}`);
  }
});

test("Vite app: the tarball + vite build of the README quick start, one click is one order under faults", { timeout: TEST_TIMEOUT_MS }, async () => {
  const app = path.join(apps, "vite-app");
  prepareApp(app, "vite");
  const dist = path.join(tmpDir, "vite-dist");
  run(path.join(app, "node_modules/.bin/vite"), ["build", "--outDir", dist, "--emptyOutDir", "--logLevel", "warn"], { cwd: app });
  checkBundle(path.join(dist, "assets"), "vite");
  await checkPage(dist, "vite");
});

test("webpack 5 app (no plugins): the tarball + webpack of the README quick start, one click is one order under faults", { timeout: TEST_TIMEOUT_MS }, async () => {
  const app = path.join(apps, "webpack-app");
  prepareApp(app, "webpack");
  const dist = path.join(tmpDir, "webpack-dist");
  const load = createRequire(path.join(app, "package.json"));
  const webpack = load("webpack");
  const config = { ...load("./webpack.config.cjs") };
  config.output = { ...config.output, path: dist };
  log("webpack-app$ webpack(webpack.config.cjs)");
  const stats = await new Promise((resolve, reject) => webpack(config, (error, result) => (error ? reject(error) : resolve(result))));
  const info = stats.toJson({ all: false, errors: true, warnings: true });
  assert.deepEqual(info.errors.map((e) => e.message), [], "webpack errors");
  assert.deepEqual(info.warnings.map((w) => w.message).filter((m) => !/asset size limit|entrypoint size limit|performance/i.test(m)), [],
    "webpack warnings (other than its size hints)");
  copyFileSync(path.join(app, "index.html"), path.join(dist, "index.html"));
  checkBundle(dist, "webpack");
  await checkPage(dist, "webpack");
});

// Rollup's and Parcel's bundles are plain ES modules like Vite's and webpack's, which every engine runs
// here; building each again per engine would add about 80 s per engine to CI, so these two build and
// drive their page in Chromium only.
const CHROMIUM_ONLY = engine === "chromium" ? false : "a Rollup/Parcel bundle is driven in Chromium only (CI time)";

test("Rollup 4 app: the tarball + rollup -c of the README quick start (node-resolve, import-meta-assets), one click is one order under faults", { timeout: TEST_TIMEOUT_MS, skip: CHROMIUM_ONLY }, async () => {
  const app = path.join(apps, "rollup-app");
  prepareApp(app, "rollup");
  const dist = path.join(tmpDir, "rollup-dist");
  run(path.join(app, "node_modules/.bin/rollup"), ["-c", "--dir", dist, "--silent"], { cwd: app });
  copyFileSync(path.join(app, "index.html"), path.join(dist, "index.html"));
  checkBundle(dist, "rollup");
  await checkPage(dist, "rollup");
});

test("Parcel 2 app (no .parcelrc): the tarball + parcel build of the README quick start, one click is one order under faults", { timeout: TEST_TIMEOUT_MS, skip: CHROMIUM_ONLY }, async () => {
  const app = path.join(apps, "parcel-app");
  prepareApp(app, "parcel");
  const dist = path.join(tmpDir, "parcel-dist");
  // Its cache outside the app (the build is from scratch each run), the page served from /.
  run(path.join(app, "node_modules/.bin/parcel"), ["build", "index.html", "--dist-dir", dist, "--cache-dir", path.join(tmpDir, "parcel-cache"),
    "--no-source-maps", "--public-url", "/", "--log-level", "warn"], { cwd: app });
  checkBundle(dist, "parcel");
  await checkPage(dist, "parcel");
});

test("esbuild app: the tarball + esbuild --bundle of the README quick start, the .wasm copied next to the bundle (README), one click is one order under faults", { timeout: TEST_TIMEOUT_MS }, async () => {
  // esbuild leaves `new URL("./idempotent_fetch_bg.wasm", import.meta.url)` as it is, so the bundle
  // looks for the .wasm next to itself: the README's one line of setup copies it there.
  const app = path.join(tmpDir, "esbuild-app");
  mkdirSync(app);
  writeFileSync(path.join(app, "package.json"), JSON.stringify({ name: "esbuild-app", private: true, version: "0.0.0", type: "module" }));
  run("npm", ["install", "--no-audit", "--no-fund", "--offline", tarball], { cwd: app });
  writeMain(app);
  const dist = path.join(app, "dist");
  run(path.join(root, "tools/node_modules/.bin/esbuild"), ["main.js", "--bundle", "--format=esm", "--minify", `--outfile=${path.join(dist, "main.js")}`, "--log-level=warning"], { cwd: app });
  copyFileSync(path.join(app, "node_modules/idempotent-fetch-client", WASM), path.join(dist, WASM));
  copyFileSync(path.join(apps, "vite-app/index.html"), path.join(dist, "index.html"));
  await checkPage(dist, "esbuild");
});

test("plain ES modules: the tarball, an import map, one click is one order under faults", { timeout: TEST_TIMEOUT_MS }, async () => {
  const app = path.join(tmpDir, "plain");
  mkdirSync(app);
  for (const file of ["index.html", "package.json"]) copyFileSync(path.join(apps, "plain", file), path.join(app, file));
  writeMain(app);
  // A tarball without dependencies: nothing is fetched from the registry.
  run("npm", ["install", "--no-audit", "--no-fund", "--offline", tarball], { cwd: app });
  assert.ok(existsSync(path.join(app, "node_modules/idempotent-fetch-client", WASM)), "npm installed the wasm");
  await checkPage(app, "plain");
});

test("Node: import (ESM) and require (CommonJS) of the tarball type-check and make one order each under faults", { timeout: TEST_TIMEOUT_MS }, async () => {
  const app = path.join(tmpDir, "node");
  mkdirSync(app);
  writeFileSync(path.join(app, "package.json"), JSON.stringify({ name: "node-app", private: true, version: "0.0.0" }));
  run("npm", ["install", "--no-audit", "--no-fund", "--offline", tarball], { cwd: app });
  for (const file of ["pay.mjs", "pay.cjs"]) copyFileSync(path.join(apps, "node", file), path.join(app, file));
  typeCheckBothModuleFormats(app);
  const server = await startReferenceServer({ www: app, label: "package-node" });
  try {
    await server.setFaults({ failBeforeWork: 0.5, dropAfterCommit: 0.5 });
    for (const script of ["pay.mjs", "pay.cjs"]) {
      const account = `acct_node_${path.extname(script).slice(1)}`;
      // How this server knows the account (tests/support/reference-server.mjs api() does the same).
      const accountHeaders = JSON.stringify({ authorization: `Bearer ${await server.session(account)}` });
      const out = JSON.parse(run(process.execPath, [script, server.url, account, accountHeaders], { cwd: app }).trim().split("\n").pop());
      log(`${script}: ${JSON.stringify(out)}`);
      assert.equal(out.code, undefined, `${script}: send rejected with ${out.code}`);
      assert.equal(out.ok, true, `${script}: a 2xx`);
      assert.equal(out.storage, "memory", `${script}: Node's default storage`);
      if (script === "pay.mjs") assert.equal(out.sameInstance, true, "import and require give the same IdempotentClient");
      await server.setFaults({});
      const orders = await ordersOf(server, account);
      assert.equal(orders.length, 1, `${script}: one order`);
      assert.equal(orders[0].idempotencyKey, out.key, `${script}: the order carries the key`);
      assert.equal(orders[0].id, out.orderId, `${script}: the answer is that order`);
      await server.setFaults({ failBeforeWork: 0.5, dropAfterCommit: 0.5 });
    }
  } finally {
    await server.stop();
  }
});

/** tests/package/<name>-app from the tarball: installed, type-checked by its template's own checker
 *  (`check` with `args`) against the tarball's types, built by Vite into a temporary folder whose
 *  bundle is checked; returns that folder. */
function buildViteApp(name, check, args) {
  const app = path.join(apps, `${name}-app`);
  prepareApp(app, "vite", { withQuickStart: false });
  run(path.join(app, "node_modules/.bin", check), args, { cwd: app });
  const dist = path.join(tmpDir, `${name}-dist`);
  run(path.join(app, "node_modules/.bin/vite"), ["build", "--outDir", dist, "--emptyOutDir", "--logLevel", "warn"], { cwd: app });
  checkBundle(path.join(dist, "assets"), name);
  return dist;
}

/**
 * Drives a checkout app built into `dist` (React, Vue, Svelte: each shows the same #pay, #status and
 * data-* attributes) through what users do and networks do: a double click while every request
 * fails, a reload mid-retry (resumed by itself, same key), a reload that rebuilt another cart
 * (?qty=3; onMismatch "replace": the server never saw the old key, so the new cart gets a new key),
 * flaky faults with "Try again" if a send runs out, a reload after the answer. One order, carrying
 * the key the page shows, with the cart the page shows.
 */
async function driveCheckout(label, dist, account) {
  const server = await startReferenceServer({ www: dist, label: `package-${label}` });
  const context = await browser.newContext();
  try {
    await server.signIn(context, account);
    const page = await context.newPage();
    const errors = collectPageErrors(page);
    const shown = () => page.evaluate(() => ({ ...document.body.dataset, status: document.getElementById("status").textContent }));
    const until = (what, predicate, timeout = 60_000 * timeoutScale) =>
      page.waitForFunction(predicate, null, { timeout }).catch(async (error) => {
        throw new Error(`${label}: waiting for ${what}: the page shows ${JSON.stringify(await shown().catch(() => null))}\n${errors.join("\n")}\n${error.message}`);
      });
    const loaded = () => until("the lookup on mount", () => document.body.dataset.ready === "true", 20_000 * timeoutScale);
    // Read in the same evaluation that sees the phase: a retry's wait (full jitter) can end before a
    // second look, and the page then says "Sending (attempt 2)…".
    const retrying = async () => (
      await until("a retry", () => document.body.dataset.phase === "retrying" && { ...document.body.dataset, status: document.getElementById("status").textContent })
    ).jsonValue();
    await page.goto(`${server.url}/`);
    await loaded();
    assert.equal((await shown()).phase, "idle", "nothing stored yet: idle");

    // The server is down (every request 503), the user clicks twice: the page says it retries, with
    // a countdown and the reason.
    await server.setFaults({ failBeforeWork: 1 });
    await page.dblclick("#pay");
    const first = await retrying();
    assert.match(first.status, /^Retrying in \d+ s \(.+\)$/, "the countdown and the reason");
    const oldKey = first.key;
    assert.match(oldKey, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/, "a UUID v4 key");

    // A reload mid-retry: on mount the binding resumes the intent by itself (no click), same key.
    await page.reload();
    await loaded();
    const resumed = await shown();
    assert.ok(["sending", "retrying"].includes(resumed.phase), `resumed on mount: ${JSON.stringify(resumed)}`);
    assert.equal(resumed.key, oldKey, "the same key after the reload");

    // A reload that rebuilds another cart: the server is asked about the old key (never seen: every
    // request failed before any work), so the new cart goes under a new key, unclicked.
    await page.goto(`${server.url}/?qty=3`);
    await loaded();
    const replaced = await retrying();
    assert.notEqual(replaced.key, oldKey, "the rebuilt cart has its own key");
    const key = replaced.key;

    // Flaky: half the requests 503, half the committed orders lose their answer; "Try again" if needed.
    await server.setFaults({ failBeforeWork: 0.5, dropAfterCommit: 0.5 });
    let result;
    for (let clicks = 0; ; clicks++) {
      await until("an answer", () => ["paid", "try-again", "problem"].includes(document.body.dataset.result), 150_000 * timeoutScale);
      result = await shown();
      if (result.result !== "try-again" || clicks >= 3) break;
      log(`${label}: a send ran out of attempts (${result.status}); clicking "Try again"`);
      await page.click("#pay");
    }
    await server.setFaults({});
    assert.equal(result.result, "paid", `${label}: the page says ${JSON.stringify(result.status)}`);
    assert.equal(result.key, key, "the same key to the end");
    let orders = await ordersOf(server, account);
    assert.equal(orders.length, 1, `one click made ${orders.length} orders`);
    assert.equal(orders[0].idempotencyKey, key, "the order carries the page's key");
    assert.equal(orders[0].id, result.orderId, "the page shows the order the server holds");
    assert.ok(JSON.stringify(orders[0]).includes('"qty":3'), `the rebuilt cart was ordered: ${JSON.stringify(orders[0])}`);

    // A reload after the answer: "already paid" on mount, no request, no new order.
    await page.reload();
    await loaded();
    const after = await shown();
    assert.equal(after.phase, "succeeded", `after the answer: ${JSON.stringify(after)}`);
    assert.equal(after.alreadyAnswered, "true", "already answered");
    assert.equal(after.key, key);
    assert.equal(after.status, "Already paid");
    orders = await ordersOf(server, account);
    assert.equal(orders.length, 1, "still one order");
    assert.deepEqual(errors, [], "errors on the page");
    log(`${label}: one order ${orders[0].id} with key ${key} through a double click, 503s, a reload mid-retry, a rebuilt cart, flaky faults and a reload after`);
  } finally {
    await context.close().catch(() => {});
    await server.stop();
  }
}

/** A free port on 127.0.0.1 (listened on, then released), for a server that must be told its port. */
const freePort = () => new Promise((resolve, reject) => {
  const probe = net.createServer().once("error", reject);
  probe.listen(0, "127.0.0.1", () => { const { port } = probe.address(); probe.close(() => resolve(port)); });
});

/** `vite <args>` (dev, or `preview`) of `app` on a free port, once it answers: { url, stop }. */
async function startVite(app, args, env = {}) {
  const port = await freePort();
  const child = spawn(path.join(app, "node_modules/.bin/vite"), [...args, "--host", "127.0.0.1", "--port", String(port), "--strictPort"], {
    cwd: app, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (chunk) => { output += chunk; });
  child.stderr.on("data", (chunk) => { output += chunk; });
  const exited = new Promise((resolve) => child.once("exit", resolve));
  const url = `http://127.0.0.1:${port}`;
  const stop = async () => { child.kill("SIGTERM"); await exited; };
  const deadline = Date.now() + 30_000 * timeoutScale;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`vite ${args.join(" ")} exited (${child.exitCode}):\n${output}`);
    if (await fetch(url).then(() => true, () => false)) return { url, stop };
    if (Date.now() > deadline) { await stop(); throw new Error(`vite ${args.join(" ")} did not answer on ${url}:\n${output}`); }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

test("Vite-built service worker (vanilla template, the README's recipe for idempotent-fetch-client/sw): vite dev answers /sw.js with HTML (the README's reason to preview); under vite build && vite preview the tab is closed while the server is down, a sync event makes one order with the page's key, the reopened page reads it succeeded", { timeout: TEST_TIMEOUT_MS, skip: capabilities.cdp ? false : `needs CDP (ServiceWorker.dispatchSyncEvent), not in ${engineName}'s WebDriver` }, async () => {
  const app = path.join(apps, "sw-app");
  prepareApp(app, "vite", { withQuickStart: false });
  const dist = path.join(tmpDir, "sw-dist");
  run(path.join(app, "node_modules/.bin/vite"), ["build", "--outDir", dist, "--emptyOutDir", "--logLevel", "warn"], { cwd: app });
  checkBundle(dist, "sw-app");
  const worker = readFileSync(path.join(dist, "sw.js"), "utf8");
  // An import statement of the package left in the worker (the source's are named imports); the
  // package's own messages may name the entry in a string.
  assert.ok(!/\bimport\s*\{[^}]*\}\s*from\s*["']idempotent-fetch/.test(worker), "the worker's bare imports were bundled");
  // What the README says of `vite dev`: no second entry, so /sw.js is the SPA fallback, which a
  // browser refuses to register (SecurityError: the MIME type text/html).
  const dev = await startVite(app, []);
  try {
    const answer = await fetch(`${dev.url}/sw.js`);
    assert.match(answer.headers.get("content-type") ?? "", /^text\/html/, "vite dev's /sw.js");
    assert.match(await answer.text(), /<div id="app">/, "vite dev's /sw.js is the app's index.html");
  } finally {
    await dev.stop();
  }
  const account = "acct_42"; // src/main.js and src/sw.js: the namespace; the session cookie's account
  const server = await startReferenceServer({ www: dist, label: "package-sw" });
  // The README's way to try it: the built app under `vite preview`, the API proxied (vite.config.js).
  const preview = await startVite(app, ["preview", "--outDir", dist], { API_ORIGIN: server.url });
  const context = await browser.newContext();
  try {
    await server.signIn(context, account);
    const errors = [];
    const open = async () => {
      const page = await context.newPage();
      collectPageErrors(page, errors);
      await page.goto(`${preview.url}/`);
      await page.waitForFunction(() => document.body.dataset.ready === "true", null, { timeout: 30_000 * timeoutScale });
      return page;
    };
    const watcher = await open(); // stays open: the DevTools session, and the worker's registration
    const cdp = await context.newCDPSession(watcher);
    const registrations = [];
    cdp.on("ServiceWorker.workerRegistrationUpdated", ({ registrations: updated }) => registrations.push(...updated));
    await cdp.send("ServiceWorker.enable");
    await server.setFaults({ failBeforeWork: 1 });
    const payer = await open();
    await payer.click("#pay");
    await payer.waitForFunction(() => Number(document.body.dataset.attempts) >= 1, null, { timeout: 20_000 * timeoutScale });
    const key = await payer.evaluate(() => document.body.dataset.key);
    await payer.close();
    // The worker Chromium woke on the page's registration (the app's three attempts) may still be
    // retrying the 503s: the server stays down until it gave up.
    await new Promise((resolve) => setTimeout(resolve, 2000));
    assert.deepEqual(await ordersOf(server, account), [], "an order while the server answered 503");
    await server.setFaults({});
    await new Promise((resolve) => setTimeout(resolve, 1000));
    assert.deepEqual(await ordersOf(server, account), [], "sent without a trigger");
    const registration = registrations.find((r) => !r.isDeleted && r.scopeURL === `${preview.url}/`);
    assert.ok(registration, `no registration for ${preview.url}/: ${JSON.stringify(registrations)}`);
    await cdp.send("ServiceWorker.dispatchSyncEvent", { origin: preview.url, registrationId: registration.registrationId, tag: "idempotent-fetch", lastChance: false });
    const deadline = Date.now() + 20_000 * timeoutScale;
    while ((await ordersOf(server, account)).length === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
    const orders = await ordersOf(server, account);
    assert.deepEqual(orders.map((order) => order.idempotencyKey), [key], "one order, with the page's key");
    const reopened = await open();
    assert.equal(await reopened.evaluate(() => document.body.dataset.state), "succeeded");
    await new Promise((resolve) => setTimeout(resolve, 500));
    assert.equal((await ordersOf(server, account)).length, 1, "the reopened page sent again");
    assert.deepEqual(errors.filter((error) => !/503|Failed to load resource/.test(error)), [], "errors on the pages");
    log(`sw-app: one order ${orders[0].id} with key ${key}, sent by the Vite-built worker (vite preview) on a sync event after the tab closed`);
  } finally {
    await context.close().catch(() => {});
    await preview.stop();
    await server.stop();
  }
});

test("React app (Vite react-ts template, idempotent-fetch-client/react): double click, server down, reload mid-retry, rebuilt cart, flaky, reload after the answer: one order", { timeout: TEST_TIMEOUT_MS }, async () => {
  const dist = buildViteApp("react", "tsc", ["-b"]);
  await driveCheckout("react", dist, "acct_react"); // src/App.tsx: namespace
});

test("Vue app (Vite vue-ts template, idempotent-fetch-client/vue): double click, server down, reload mid-retry, rebuilt cart, flaky, reload after the answer: one order", { timeout: TEST_TIMEOUT_MS }, async () => {
  const dist = buildViteApp("vue", "vue-tsc", ["-b"]);
  await driveCheckout("vue", dist, "acct_vue"); // src/client.ts: namespace
});

test("Svelte app (Vite svelte-ts template, idempotent-fetch-client/svelte): double click, server down, reload mid-retry, rebuilt cart, flaky, reload after the answer: one order", { timeout: TEST_TIMEOUT_MS }, async () => {
  const dist = buildViteApp("svelte", "svelte-check", ["--tsconfig", "./tsconfig.app.json", "--fail-on-warnings"]);
  await driveCheckout("svelte", dist, "acct_svelte"); // src/client.ts: namespace
});

test("TanStack Query app (react-ts template, @tanstack/react-query persisted, idempotent-fetch-client/tanstack, retry: 3): double click, 503s, reload mid-retry, rebuilt cart, flaky, Pay again after the answer: one order", { timeout: TEST_TIMEOUT_MS }, async () => {
  const dist = buildViteApp("tanstack", "tsc", ["-b"]);
  const account = "acct_tanstack"; // src/App.tsx: namespace
  const server = await startReferenceServer({ www: dist, label: "package-tanstack" });
  const context = await browser.newContext();
  try {
    await server.signIn(context, account);
    const page = await context.newPage();
    const errors = collectPageErrors(page);
    const shown = () => page.evaluate(() => ({ ...document.body.dataset, status: document.getElementById("status").textContent }));
    const until = (what, predicate, timeout = 60_000 * timeoutScale) =>
      page.waitForFunction(predicate, null, { timeout }).catch(async (error) => {
        throw new Error(`tanstack: waiting for ${what}: the page shows ${JSON.stringify(await shown().catch(() => null))}\n${errors.join("\n")}\n${error.message}`);
      });
    const loaded = () => until("the lookup on load", () => document.body.dataset.ready === "true", 20_000 * timeoutScale);
    const keysSent = async () => ((await shown()).keys ?? "").split(" ").filter(Boolean);
    await page.goto(`${server.url}/`);
    await loaded();

    // Every request 503, a double click: the library's attempts run out and TanStack retries the
    // mutation (retry: 3); every one of its tries sends with the same key.
    await server.setFaults({ failBeforeWork: 1 });
    await page.dblclick("#pay");
    await until("a TanStack retry", () => Number(document.body.dataset.failures) >= 2);
    const first = await keysSent();
    assert.equal(first.length, 1, `one key through TanStack's retries: ${first}`);

    // A reload mid-retry drops TanStack's running mutation; the page finds the pending intent and
    // mutates again: the same key.
    await page.reload();
    await loaded();
    await until("the resumed send", () => (document.body.dataset.keys ?? "") !== "");
    assert.deepEqual(await keysSent(), first, "the same key after the reload");

    // A reload that rebuilt another cart: the old key was never seen by the server, so it is replaced.
    await page.goto(`${server.url}/?qty=3`);
    await loaded();
    await until("the replaced send", () => (document.body.dataset.keys ?? "") !== "");
    const [key] = await keysSent();
    assert.notEqual(key, first[0], "the rebuilt cart has its own key");

    await server.setFaults({ failBeforeWork: 0.5, dropAfterCommit: 0.5 });
    let result;
    for (let clicks = 0; ; clicks++) {
      await until("an answer", () => ["paid", "try-again"].includes(document.body.dataset.result) && document.body.dataset.phase !== "pending", 150_000 * timeoutScale);
      result = await shown();
      if (result.result === "paid" || clicks >= 5) break;
      log(`tanstack: the mutation failed (${result.status}); clicking "Try again"`);
      await page.click("#pay");
    }
    await server.setFaults({});
    assert.equal(result.result, "paid", `tanstack: the page says ${JSON.stringify(result.status)}`);
    assert.deepEqual(await keysSent(), [key], "one key for the rebuilt cart, to the end");
    let orders = await ordersOf(server, account);
    assert.equal(orders.length, 1, `one click made ${orders.length} orders`);
    assert.equal(orders[0].idempotencyKey, key);
    assert.equal(orders[0].id, result.orderId);
    assert.ok(JSON.stringify(orders[0]).includes('"qty":3'), `the rebuilt cart was ordered: ${JSON.stringify(orders[0])}`);

    // After a reload TanStack has forgotten the mutation and shows Pay: clicking it again is the
    // same intent, answered: the same order, none new.
    await page.reload();
    await loaded();
    await page.click("#pay");
    await until("the answer again", () => document.body.dataset.result === "paid");
    assert.equal((await shown()).orderId, orders[0].id, "the order made before");
    orders = await ordersOf(server, account);
    assert.equal(orders.length, 1, "still one order");
    assert.deepEqual(errors, [], "errors on the page");
    log(`tanstack: one order ${orders[0].id} with key ${key} through TanStack's retry: 3, a double click, a reload mid-retry, a rebuilt cart, flaky faults and Pay again`);
  } finally {
    await context.close().catch(() => {});
    await server.stop();
  }
});

test("server rendering: the package and idempotent-fetch-client/react import without window, and the hook renders to HTML (Node)", { timeout: TEST_TIMEOUT_MS }, async () => {
  const app = path.join(apps, "react-app");
  prepareApp(app, "vite", { withQuickStart: false });
  // The script next to the React app's node_modules (react, react-dom and the packed package).
  const dir = path.join(tmpDir, "ssr");
  mkdirSync(dir);
  symlinkSync(path.join(app, "node_modules"), path.join(dir, "node_modules"), "dir");
  writeFileSync(path.join(dir, "package.json"), JSON.stringify({ name: "ssr", private: true, type: "module" }));
  copyFileSync(path.join(apps, "node/ssr.mjs"), path.join(dir, "ssr.mjs"));
  const out = JSON.parse(run(process.execPath, ["ssr.mjs"], { cwd: dir }).trim().split("\n").pop());
  log(`ssr: ${JSON.stringify(out)}`);
  assert.deepEqual(out.globals, { window: "undefined", document: "undefined", localStorage: "undefined" }, "no browser globals");
  assert.deepEqual(out.problems, [], "nothing threw or rejected");
  assert.equal(out.html, '<p data-phase="checking">checking no key no countdown</p>', "the hook's first phase, rendered");
  assert.equal(out.storage, "memory");
  assert.equal(out.pending, 0, "rendering begins nothing");
});

// The npm page's snippets, built and driven as pasted.

/** Where the screenshots of the snippets' states go (IF_SCREENSHOT_DIR, or a temporary folder kept
 *  after the run, so that a person can look at them). */
let shotDir;
function shotsDir() {
  if (!shotDir) {
    shotDir = process.env.IF_SCREENSHOT_DIR || mkdtempSync(path.join(os.tmpdir(), "if-snippet-shots-"));
    mkdirSync(shotDir, { recursive: true });
    log(`screenshots of the snippets' states: ${shotDir}`);
  }
  return shotDir;
}

/** The snippet `name` and the page's shop.ts pasted into a copy of tests/package/<template>-app,
 *  checked and built by `steps` ([command, args] run in the copy); returns the built folder. */
function buildSnippet(name, template, steps) {
  const pasted = readSnippets(readFileSync(path.join(pkgDir, "README.md"), "utf8"));
  const app = path.join(apps, `${template}-app`);
  prepareApp(app, "vite", { withQuickStart: false });
  const dir = snippetApp(app, path.join(tmpDir, `snippet-${name}`), {
    "src/shop.ts": pasted.shop,
    [HARNESS[name].component]: pasted[name],
    ...HARNESS[name].files,
  });
  for (const [command, args] of steps) run(command === "npm" ? command : path.join(dir, "node_modules/.bin", command), args, { cwd: dir });
  checkBundle(path.join(dir, "dist/assets"), `${name} snippet`);
  return path.join(dir, "dist");
}

/** A fresh browser context (empty storage) on `query` of the snippet's page, for `account` (signed
 *  in unless `signedIn` is false), with what the tests do there: read the text, wait for it, click a
 *  button by its words, take a screenshot, count the order POSTs (Chromium). */
async function snippetPage(server, label, account, query, { signedIn = true } = {}) {
  const context = await browser.newContext();
  if (signedIn) await server.signIn(context, account);
  const page = await context.newPage();
  const errors = collectPageErrors(page);
  const posts = [];
  if (capabilities.network) page.on("request", (request) => {
    if (request.method() === "POST" && new URL(request.url()).pathname === "/api/orders") posts.push(request.headers()["idempotency-key"]);
  });
  const text = () => page.evaluate(() => document.querySelector("main")?.innerText ?? "");
  const fail = async (what, error) => {
    throw new Error(`${label}: waiting for ${what}: the page says ${JSON.stringify(await text().catch(() => null))}\n${errors.join("\n")}\n${error.message}`);
  };
  const shown = {
    page, context, errors, posts, text,
    /** Waits until the page's text matches `pattern`; resolves to the match. */
    async until(what, pattern, timeout = 60_000 * timeoutScale) {
      await page.waitForFunction(([source, flags]) => new RegExp(source, flags).test(document.querySelector("main")?.innerText ?? ""),
        [pattern.source, pattern.flags], { timeout }).catch((error) => fail(what, error));
      return pattern.exec(await text());
    },
    /** Waits for an enabled button with these words. */
    async button(words, timeout = 30_000 * timeoutScale) {
      await page.waitForFunction((w) => [...document.querySelectorAll("button")].some((b) => b.textContent.trim() === w && !b.disabled),
        words, { timeout }).catch((error) => fail(`the button "${words}"`, error));
    },
    async click(words) {
      await shown.button(words);
      assert.ok(await page.evaluate((w) => {
        const button = [...document.querySelectorAll("button")].find((b) => b.textContent.trim() === w && !b.disabled);
        button?.click();
        return Boolean(button);
      }, words), `${label}: no button "${words}"`);
    },
    async shot(state) {
      const file = path.join(shotsDir(), `${label}-${state}.png`);
      await page.screenshot({ path: file });
      log(`${label}: ${state}: ${JSON.stringify(await text())} (${file})`);
    },
    async goto(q) {
      await page.goto(`${server.url}/${q}`);
    },
  };
  await shown.goto(query);
  return shown;
}

/** The account's only order is `orderId`, of `qty` mugs. */
async function oneOrder(server, account, orderId, qty, label) {
  const orders = await ordersOf(server, account);
  assert.equal(orders.length, 1, `${label}: ${orders.length} orders: ${JSON.stringify(orders)}`);
  assert.equal(orders[0].id, orderId, `${label}: the page names the order the server holds`);
  assert.deepEqual(orders[0].items.map(({ sku, qty: q }) => ({ sku, qty: q })), [{ sku: "mug", qty }], `${label}: the cart the page says was paid`);
}

const PAID = /Paid \(order (ord_\w+)\)\./;
const EARLIER = /Your earlier cart was paid \(order (ord_\w+)\), not the cart shown here\./;
const RETRYING = /No answer yet: trying again in ([2-9]|\d{2,}) s/;

/** A reload that rebuilt the cart (1 mug, then 2) while the first payment was unanswered, and each way
 *  out: one order of the cart the page names, or none. `page(account, query)` opens the snippet's page. */
async function changedCartWays(name, server, page) {
  let account;
  let p;
  for (const [n, way] of ["Pay for the cart as it is now", "Finish the earlier payment", "Don't pay"].entries()) {
    account = `acct_${name}_changed_${n}`;
    p = await page(account, "?qty=1");
    await server.setFaults({ failBeforeWork: 1 });
    await p.click("Pay");
    await p.until("the countdown", /trying again in/);
    // The shopper comes back to a cart rebuilt with 2 mugs while the earlier payment is unanswered
    // (the server still refuses it: a retry between here and the reload would pay the earlier cart).
    await p.goto("?qty=2");
    await p.until("the changed cart", /Your cart: 2 × mug\s+Your cart changed after you clicked Pay\./);
    await server.setFaults({});
    await p.button("Finish the earlier payment"); // persistRequest: true in shop.ts
    if (way.startsWith("Pay")) await p.shot("changed");
    await p.click(way);
    const label = `${name}, "${way}"`;
    if (way.startsWith("Pay")) {
      const [, order] = await p.until("the new cart's answer", PAID);
      await oneOrder(server, account, order, 2, label);
    } else if (way.startsWith("Finish")) {
      const [, order] = await p.until("the earlier cart's answer", EARLIER);
      await oneOrder(server, account, order, 1, label);
    } else {
      await p.button("Pay");
      await p.page.waitForTimeout(1000);
      assert.doesNotMatch(await p.text(), /Paid|paid \(/, `${label}: the page says nothing was paid`);
      assert.deepEqual(await ordersOf(server, account), [], `${label}: no order`);
    }
    await p.shot(`changed-${way.split(" ")[0].toLowerCase().replace("'", "")}`);
    assert.deepEqual(p.errors, [], `${label}: errors on the page`);
  }
}

/** Idle, retrying (every request 503), paid; refused (a 400: an unknown product) and signed out (a
 *  401), each answer sent once; then a reload that rebuilt the cart (1 mug, then 2) while the first
 *  payment was unanswered, and each way out: one order of the cart the page names, or none. */
async function driveSnippet(name, dist) {
  const server = await startReferenceServer({ www: dist, label: `snippet-${name}` });
  const open = [];
  const page = async (account, query, options) => {
    const shown = await snippetPage(server, name, account, query, options);
    open.push(shown.context);
    return shown;
  };
  try {
    let account = `acct_${name}_pay`;
    let p = await page(account, "?qty=2");
    await p.button("Pay");
    await p.shot("idle");
    await server.setFaults({ failBeforeWork: 1 });
    await p.click("Pay");
    await p.until("the countdown", RETRYING);
    await p.shot("retrying");
    await server.setFaults({});
    const [, paid] = await p.until("the answer", PAID);
    await p.shot("paid");
    await oneOrder(server, account, paid, 2, `${name}, paid`);

    for (const [state, query, signedIn, words] of [
      ["refused", "?sku=no-such-product", true, /The shop refused this payment\./],
      ["signed-out", "?qty=2", false, /Please sign in again to pay\./],
    ]) {
      account = `acct_${name}_${state}`;
      p = await page(account, query, { signedIn });
      await p.click("Pay");
      await p.until(`the ${state} answer`, words);
      await p.shot(state);
      if (capabilities.network) assert.equal(p.posts.length, 1, `${name}, ${state}: a definite answer is not retried`);
      if (signedIn) assert.deepEqual(await ordersOf(server, account), [], `${name}, ${state}: no order`);
    }

    await changedCartWays(name, server, page);
  } finally {
    for (const context of open) await context.close().catch(() => {});
    await server.stop();
  }
}

test("the npm page's snippets: each framework's snippet is the repository README's too, and shop.ts is shown once for all", () => {
  const pasted = readSnippets(readFileSync(path.join(pkgDir, "README.md"), "utf8"));
  const repoReadme = readFileSync(path.join(root, "README.md"), "utf8");
  for (const [name, code] of Object.entries(pasted)) {
    assert.ok(repoReadme.includes(code), `the repository README shows the npm page's ${name} snippet verbatim`);
    if (name !== "shop") assert.match(code, /from "\.\/shop";/, `the ${name} snippet takes client, Cart and Order from shop.ts`);
  }
});

const SNIPPET_TIMEOUT_MS = 420_000 * timeoutScale;

test("React snippet of the npm page, pasted into the react-ts template (npm run build: tsc -b && vite build): idle, retrying, paid, refused, signed out, a changed cart and each way out", { timeout: SNIPPET_TIMEOUT_MS }, async () => {
  await driveSnippet("react", buildSnippet("react", "react", [["npm", ["run", "build"]]]));
});

test("Vue snippet of the npm page, pasted into the vue-ts template (npm run build: vue-tsc -b && vite build): idle, retrying, paid, refused, signed out, a changed cart and each way out", { timeout: SNIPPET_TIMEOUT_MS }, async () => {
  await driveSnippet("vue", buildSnippet("vue", "vue", [["npm", ["run", "build"]]]));
});

test("Svelte snippet of the npm page, pasted into the svelte-ts template (svelte-check, npm run build): idle, retrying, paid, refused, signed out, a changed cart and each way out", { timeout: SNIPPET_TIMEOUT_MS }, async () => {
  await driveSnippet("svelte", buildSnippet("svelte", "svelte", [["svelte-check", ["--tsconfig", "./tsconfig.app.json", "--fail-on-warnings"]], ["npm", ["run", "build"]]]));
});

test("TanStack Query snippet of the npm page, pasted into the react-ts template with @tanstack/react-query (npm run build): idle, retrying, a reload mid-retry resumed with its key, paid, a 400 not retried, a changed cart and each way out", { timeout: SNIPPET_TIMEOUT_MS }, async () => {
  const name = "tanstack";
  const dist = buildSnippet(name, "tanstack", [["npm", ["run", "build"]]]);
  const server = await startReferenceServer({ www: dist, label: "snippet-tanstack" });
  const open = [];
  try {
    let account = "acct_tanstack_pay";
    let p = await snippetPage(server, name, account, "?qty=2");
    open.push(p.context);
    await p.button("Pay");
    await p.shot("idle");
    await server.setFaults({ failBeforeWork: 1 });
    await p.click("Pay");
    await p.until("the countdown", RETRYING);
    await p.shot("retrying");
    // A reload mid-retry: TanStack forgot the mutation; the snippet's effect sends the intent again.
    await p.page.reload();
    await p.until("the resumed send's countdown", /trying again in/);
    await server.setFaults({});
    const [, paid] = await p.until("the answer, without a click", PAID);
    await p.shot("paid");
    await oneOrder(server, account, paid, 2, "tanstack, paid");
    if (capabilities.network) assert.equal(new Set(p.posts).size, 1, `tanstack: one key through the retries and the reload: ${p.posts}`);

    account = "acct_tanstack_refused";
    p = await snippetPage(server, name, account, "?sku=no-such-product");
    open.push(p.context);
    await p.click("Pay");
    await p.until("the refusal", /The shop refused this payment\./);
    await p.shot("refused");
    // TanStack's retry would try again after 1 s: give it the time to.
    await p.page.waitForTimeout(2500);
    if (capabilities.network) assert.equal(p.posts.length, 1, "tanstack: a 400 is sent once (the default retry, retryUnanswered)");
    assert.deepEqual(await ordersOf(server, account), [], "tanstack: no order for a refused cart");
    for (const shown of [p]) assert.deepEqual(shown.errors, [], "tanstack: errors on the page");

    await changedCartWays(name, server, async (account, query, options) => {
      const shown = await snippetPage(server, name, account, query, options);
      open.push(shown.context);
      return shown;
    });
  } finally {
    for (const context of open) await context.close().catch(() => {});
    await server.stop();
  }
});
