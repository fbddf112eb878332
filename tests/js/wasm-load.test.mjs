// How a page's bundle loads the .wasm (the glue src/js/abi.ts as the package bundles it, and src/js/wasm.ts): served
// as application/wasm it compiles while streaming, with no warning; served with another Content-Type
// it falls back to the bytes and warns once; a failed first request rejects `ready` with the status,
// and the next `begin` requests the .wasm again and works; a client made before the .wasm arrived warms
// its storage up only once the module is ready (the storage's first use holds the main thread, which
// the .wasm's compile needs). Each page is served by a server of this
// file on 127.0.0.1 that counts the .wasm requests and answers them as the test says.
// Run: node --test tests/js/wasm-load.test.mjs (in each engine: IF_BROWSER, tests/support/browsers.mjs).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";

import { engineName, launchBrowser, timeoutScale } from "../support/browsers.mjs";
import { pkgDir, pkgMissing } from "../support/paths.mjs";

const TEST_TIMEOUT_MS = 30_000 * timeoutScale;

// A classic script records console.warn before the module runs (every engine, no DevTools needed);
// the module awaits `ready`, then begins an intent, which needs the machine.
const PAGE = `<!doctype html><script>
  window.warnings = [];
  const warn = console.warn.bind(console);
  console.warn = (...args) => { window.warnings.push(args.map(String).join(" ")); warn(...args); };
</script><script type="module">
  import { ready, IdempotentClient } from "/pkg/index.js";
  window.result = (async () => {
    let first = "ready";
    try { await ready; } catch (error) { first = "rejected: " + error.message; }
    const client = new IdempotentClient({ namespace: "wasm-load", storage: "memory" });
    const operation = await client.begin("checkout", new Request("/orders", { method: "POST", body: "{}" }));
    return { first, key: operation.key, warnings: window.warnings };
  })().catch((error) => ({ error: String(error?.stack ?? error) }));
</script>`;

// A client made at once with the default storage (localStorage in a page); the .wasm is held back by
// the server, so the page is idle (and the client's warm-up due) long before it arrives. Whether the
// warm-up wrote the namespace's fingerprint secret before `ready`, and after it.
const WARM_UP_PAGE = `<!doctype html><script type="module">
  import { ready, IdempotentClient } from "/pkg/index.js";
  window.result = (async () => {
    const written = () => Object.keys(localStorage).some((key) => key.startsWith("idempotent-fetch:v1:wasm-warm-up"));
    new IdempotentClient({ namespace: "wasm-warm-up" });
    await new Promise((resolve) => setTimeout(resolve, ${1200 * timeoutScale}));
    const beforeReady = written();
    await ready;
    for (let i = 0; i < 250 && !written(); i++) await new Promise((resolve) => setTimeout(resolve, 20));
    return { beforeReady, afterReady: written() };
  })().catch((error) => ({ error: String(error?.stack ?? error) }));
</script>`;

let browser;
let server;
/** How the next .wasm requests are answered (after `delayMs`), and how many came. */
let wasm = { contentType: "application/wasm", failFirst: false, delayMs: 0, requests: 0 };

before(async () => {
  browser = await launchBrowser({ what: `the .wasm loading tests in ${engineName}`, also: [pkgMissing(pkgDir)] });
  server = http.createServer((req, res) => {
    const { pathname } = new URL(req.url, "http://127.0.0.1");
    if (pathname === "/" || pathname === "/warm-up") {
      res.writeHead(200, { "content-type": "text/html", "cache-control": "no-store" });
      return res.end(pathname === "/" ? PAGE : WARM_UP_PAGE);
    }
    // The package's files, its parts under /pkg/lazy/ included (a `Request` body loads one).
    const inPkg = pathname.startsWith("/pkg/") ? path.join(pkgDir, path.normalize(pathname.slice("/pkg/".length))) : null;
    const file = inPkg?.startsWith(pkgDir + path.sep) && existsSync(inPkg) ? inPkg : null;
    if (file?.endsWith(".wasm")) {
      wasm.requests++;
      if (wasm.failFirst && wasm.requests === 1) {
        res.writeHead(503, { "cache-control": "no-store" });
        return res.end("unavailable");
      }
      const answer = () => res.writeHead(200, { "content-type": wasm.contentType, "cache-control": "no-store" }).end(readFileSync(file));
      return wasm.delayMs ? void setTimeout(answer, wasm.delayMs) : answer();
    }
    if (file?.endsWith(".js")) {
      res.writeHead(200, { "content-type": "text/javascript", "cache-control": "no-store" });
      return res.end(readFileSync(file));
    }
    res.writeHead(404);
    res.end();
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
});

after(async () => {
  await browser?.close();
  await new Promise((resolve) => (server ? server.close(resolve) : resolve()));
});

/** Opens the page in a fresh context with the .wasm answered as `answer` says; the page's result. */
async function load(answer, page = "/") {
  wasm = { contentType: "application/wasm", failFirst: false, delayMs: 0, ...answer, requests: 0 };
  const context = await browser.newContext();
  try {
    const tab = await context.newPage();
    await tab.goto(`http://127.0.0.1:${server.address().port}${page}`);
    const result = await tab.evaluate(() => window.result);
    assert.equal(result.error, undefined, `the page failed: ${result.error}`);
    return { ...result, wasmRequests: wasm.requests };
  } finally {
    await context.close();
  }
}

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

test("served as application/wasm: one request, ready, no warning", { timeout: TEST_TIMEOUT_MS }, async () => {
  const result = await load({});
  assert.equal(result.first, "ready");
  assert.match(result.key, UUID_V4);
  assert.equal(result.wasmRequests, 1);
  assert.deepEqual(result.warnings, []);
});

test("served with another Content-Type: the bytes are compiled instead, with one warning", { timeout: TEST_TIMEOUT_MS }, async () => {
  const result = await load({ contentType: "application/octet-stream" });
  assert.equal(result.first, "ready");
  assert.match(result.key, UUID_V4);
  assert.equal(result.wasmRequests, 1, "the fallback reads the same response, it does not fetch again");
  assert.equal(result.warnings.length, 1, result.warnings.join("\n"));
  // The page loads pkg/index.js, the production build: its short warning names the fix.
  assert.match(result.warnings[0], /^idempotent-fetch: serve the \.wasm as application\/wasm\n/);
});

test("a failed first request rejects ready with its status; the next begin requests the .wasm again", { timeout: TEST_TIMEOUT_MS }, async () => {
  const result = await load({ failFirst: true });
  assert.match(result.first, /^rejected: failed to fetch Wasm: 503 /);
  assert.match(result.key, UUID_V4);
  assert.equal(result.wasmRequests, 2);
});

test("a client made before the .wasm arrived leaves the storage alone until the module is ready, then warms it up", { timeout: TEST_TIMEOUT_MS }, async () => {
  const result = await load({ delayMs: 2500 * timeoutScale }, "/warm-up");
  assert.equal(result.beforeReady, false, "the warm-up touched the storage while the .wasm was on its way");
  assert.equal(result.afterReady, true, "the warm-up did not store the namespace's secret once ready");
});
