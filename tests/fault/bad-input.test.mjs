// The bad-input matrix (rows in bad-input-cases.mjs), one node:test test per row and environment:
// Node against the package (memory storage) and a real browser against pkg/index.development.js (real localStorage, page
// bad-input.html): the engine IF_BROWSER names (chromium, firefox, webkit; tests/support/browsers.mjs). After every row runCase (tests/js/cases.mjs) does a sanity begin+send
// against a 201 endpoint, so a row that trapped the wasm instance fails itself or the next one.
//
// Run: node --test tests/fault/bad-input.test.mjs (run.mjs --ci runs it too, for `cargo xtask test`).
// Needs the package built (cargo xtask build) and the engine's browser and driver (tests/support/browsers.mjs).
// The browser rows launch the browser lazily, so the Node rows run without it. Under `cargo xtask
// test` the file runs once per engine; the Node rows then run with IF_BROWSER=chromium only.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";

import { collectPageErrors, engine, engineName, launchBrowser, openLibPage, throwPageFailure, waitForLibPage } from "../support/browsers.mjs";
import { pkgMissing, requirePackage } from "../support/paths.mjs";
import { startStaticServer } from "../support/static-server.mjs";
import { startTestServer } from "../support/test-server.mjs";
import { knownFailure } from "../support/known-failures.mjs";
import { withTimeout } from "../support/timing.mjs";
import { makeContext, runCase } from "../js/cases.mjs";
import { rows } from "./bad-input-cases.mjs";

const ROW_TIMEOUT_MS = 20_000;

// Node `require` of the package (the "node" + "require" condition); node.test.mjs covers `import`.
const lib = requirePackage();

/** A TCP server that writes broken HTTP, by path. Answers preflights so a page could use it too. */
function startRawServer() {
  const cors = "Access-Control-Allow-Origin: *\r\nAccess-Control-Allow-Headers: *\r\nAccess-Control-Allow-Methods: POST\r\n"
    + "Access-Control-Expose-Headers: retry-after, idempotent-replayed, stripe-should-retry\r\n";
  const seen = new Set();
  const server = net.createServer((socket) => {
    let head = "";
    socket.on("error", () => {});
    socket.on("data", (chunk) => {
      head += chunk.toString("latin1");
      const end = head.indexOf("\r\n\r\n");
      if (end < 0) return;
      const length = Number(/content-length:\s*(\d+)/i.exec(head)?.[1] ?? 0);
      if (head.length < end + 4 + length) return;
      const [method, target] = head.split(" ");
      head = "";
      if (method === "OPTIONS") {
        socket.write(`HTTP/1.1 204 No Content\r\n${cors}Content-Length: 0\r\n\r\n`);
        return;
      }
      if (target.startsWith("/ra/")) {
        const url = new URL(target, "http://x");
        const first = !seen.has(url.pathname);
        seen.add(url.pathname);
        const retryAfter = url.searchParams.get("v") ?? "";
        socket.end(first
          ? `HTTP/1.1 429 Too Many Requests\r\n${cors}Retry-After: ${retryAfter}\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`
          : `HTTP/1.1 201 Created\r\n${cors}Content-Length: 2\r\nConnection: close\r\n\r\n{}`);
        return;
      }
      switch (target) {
        case "/status999":
          socket.end(`HTTP/1.1 999 Nope\r\n${cors}Content-Length: 4\r\nConnection: close\r\n\r\nnope`);
          break;
        case "/garbage":
          socket.end("THIS IS NOT HTTP\r\n\r\n\u0000\u0001");
          break;
        case "/badheader":
          socket.end(`HTTP/1.1 201 Created\r\n${cors}X-Bad: a\u0001b\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`);
          break;
        case "/junkhdr":
          socket.end(`HTTP/1.1 201 Created\r\n${cors}Idempotent-Replayed: maybe\r\nStripe-Should-Retry: perhaps\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`);
          break;
        default: // "/close"
          socket.destroy();
      }
    });
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve({
    url: `http://127.0.0.1:${server.address().port}`,
    close: () => new Promise((done) => server.close(() => done())),
  })));
}

let server;
let raw;
let statics;
let browser;
let page;
const pageErrors = [];

before(async () => {
  server = await startTestServer();
  raw = await startRawServer();
});
after(async () => {
  await browser?.close();
  await statics?.close();
  await raw?.close();
  await server?.close();
});

async function openPage() {
  browser = await launchBrowser({ what: `the ${engineName} rows`, also: [pkgMissing()] });
  statics = await startStaticServer();
  page = await (await browser.newContext()).newPage();
  collectPageErrors(page, pageErrors);
  await openLibPage(page, `${statics.url}/tests/fault/bad-input.html`, { timeout: 20_000 });
}

// The Node rows do not depend on the engine: run them in the Chromium pass (the default) only.
const nodeRows = engine === "chromium";
for (const row of rows) {
  if (row.env === "browser" || !nodeRows) continue;
  test(`node | ${row.name}`, { timeout: ROW_TIMEOUT_MS }, async () => {
    const ctx = makeContext({ lib, server: server.url, storage: "memory", browser: false });
    ctx.raw = raw.url;
    await runCase(row, ctx);
  });
}

for (const row of rows) {
  if (row.env === "node") continue;
  test(`${engine} | ${row.name}`, { todo: knownFailure(row.name) }, async () => {
    if (!page) await openPage();
    if (row.freshPage) {
      await page.reload();
      await waitForLibPage(page, { timeout: 20_000 });
    }
    const outcome = await withTimeout(page.evaluate(([name, s, r]) => window.__runRow(name, s, r), [row.name, server.url, raw.url]), ROW_TIMEOUT_MS, row.name);
    throwPageFailure(outcome, "BrowserRowFailure");
  });
}

test(`${engine} | no uncaught errors in the page`, () => {
  if (pageErrors.length) throw new Error(`uncaught errors in the page:\n${pageErrors.join("\n")}`);
});

// After every hostile row (a trap, a poisoned state or a leak would show here): one module instance
// still makes an intent, retries it with one key and gets the answer.
test("node | after the whole matrix the module still retries one intent with one key", async () => {
  const ctx = makeContext({ lib, server: server.url, storage: "memory", browser: false });
  const op = await ctx.client().begin("after-matrix", { url: ctx.url("after-matrix", "503,201"), body: "ok" });
  const result = await op.send();
  assert.equal(result.status, 201);
  assert.equal(result.key, op.key);
  assert.deepEqual((await ctx.log("after-matrix")).map((request) => request.key), [op.key, op.key]);
});
