// The bad-input matrix (rows in bad-input-cases.mjs), one node:test test per row and environment:
// Node against pkg/node (memory storage) and headless Chromium against pkg/web (real localStorage,
// page bad-input.html). After every row runCase (tests/js/cases.mjs) does a sanity begin+send
// against a 201 endpoint, so a row that trapped the wasm instance fails itself or the next one.
//
// Run: node --test tests/fault/bad-input.test.mjs (run.mjs --ci runs it too, for `cargo xtask test`).
// Needs pkg/node and pkg/web built, playwright-core in tools/node_modules, Chromium (CHROMIUM_PATH
// or /usr/bin/chromium).
import { test, before, after } from "node:test";
import { createRequire } from "node:module";
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import http from "node:http";
import net from "node:net";
import path from "node:path";

import { startTestServer } from "../support/test-server.mjs";
import { makeContext, runCase } from "../js/cases.mjs";
import { rows } from "./bad-input-cases.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const chromiumPath = process.env.CHROMIUM_PATH || "/usr/bin/chromium";
const CHROMIUM_ARGS = [
  "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
  "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
];
const ROW_TIMEOUT_MS = 20_000;

const entry = path.join(root, "pkg/node/idempotent_fetch.js");
if (!existsSync(entry)) throw new Error(`${entry} is missing: wasm-pack build --release --target nodejs --out-dir pkg/node`);
const lib = createRequire(import.meta.url)(entry);

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

const MIME = { ".html": "text/html; charset=utf-8", ".js": "text/javascript", ".mjs": "text/javascript", ".wasm": "application/wasm" };
function startStaticServer() {
  const server = http.createServer(async (req, res) => {
    const file = path.resolve(root, "." + decodeURIComponent(new URL(req.url, "http://x").pathname));
    if (!file.startsWith(root + path.sep)) return res.writeHead(403).end();
    try {
      const body = await readFile(file);
      res.writeHead(200, { "content-type": MIME[path.extname(file)] ?? "application/octet-stream", "cache-control": "no-store" }).end(body);
    } catch {
      res.writeHead(404).end();
    }
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve({
    url: `http://127.0.0.1:${server.address().port}`,
    close: () => new Promise((done) => { server.closeAllConnections(); server.close(() => done()); }),
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
  const missing = [];
  if (!existsSync(path.join(root, "pkg/web/idempotent_fetch.js"))) missing.push("pkg/web is not built");
  if (!existsSync(path.join(root, "tools/node_modules/playwright-core"))) missing.push("playwright-core missing (cd tools && npm ci)");
  if (!existsSync(chromiumPath)) missing.push(`no Chromium at ${chromiumPath} (set CHROMIUM_PATH)`);
  if (missing.length) throw new Error(`cannot run the Chromium rows: ${missing.join("; ")}`);
  const { chromium } = createRequire(path.join(root, "tools/package.json"))("playwright-core");
  statics = await startStaticServer();
  browser = await chromium.launch({ executablePath: chromiumPath, args: CHROMIUM_ARGS });
  page = await (await browser.newContext()).newPage();
  page.on("pageerror", (error) => pageErrors.push(String(error?.stack ?? error)));
  await page.goto(`${statics.url}/tests/fault/bad-input.html`);
  await page.waitForFunction(() => window.__ready || window.__initError, null, { timeout: 20_000 });
  const initError = await page.evaluate(() => window.__initError);
  if (initError) throw new Error(`the page could not load pkg/web: ${initError}`);
}

function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms); });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

for (const row of rows) {
  if (row.env === "browser") continue;
  test(`node | ${row.name}`, { timeout: ROW_TIMEOUT_MS }, async () => {
    const ctx = makeContext({ lib, server: server.url, storage: "memory", browser: false });
    ctx.raw = raw.url;
    await runCase(row, ctx);
  });
}

for (const row of rows) {
  if (row.env === "node") continue;
  test(`chromium | ${row.name}`, async () => {
    if (!page) await openPage();
    const outcome = await withTimeout(page.evaluate(([name, s, r]) => window.__runRow(name, s, r), [row.name, server.url, raw.url]), ROW_TIMEOUT_MS, row.name);
    if (!outcome.ok) {
      const error = new Error(`${outcome.message}${outcome.code ? ` [${outcome.code}]` : ""}\n--- in the page:\n${outcome.stack ?? ""}`);
      error.name = "BrowserRowFailure";
      throw error;
    }
  });
}

test("chromium | no uncaught errors in the page", () => {
  if (pageErrors.length) throw new Error(`uncaught errors in the page:\n${pageErrors.join("\n")}`);
});

test("the matrix has at least 40 rows", () => {
  if (rows.length < 40) throw new Error(`only ${rows.length} rows`);
});
