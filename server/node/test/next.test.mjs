// The Next.js example checkout (examples/next-checkout, App Router, idempotent-endpoint/next over node-postgres)
// as an app developer gets it: the package packed (npm pack) and installed from the tarball, `next build`,
// `next start` on 127.0.0.1 against a real PostgreSQL this test starts. The browser package's client
// drives it through a proxy that answers 503 before any work and loses answers after the work: one order per
// intent. The browser package's `check` passes against it.
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, statSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";

import { startCluster } from "../../../tests/fault/pg-cluster.mjs";
import { assertCheckPasses, BODY, PKG } from "./support/conformance.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const PACKAGE = path.join(HERE, "..");
const APP = path.join(PACKAGE, "examples/next-checkout");
const NEXT = path.join(APP, "node_modules/.bin/next");
const log = (text) => console.log(`# next.test: ${text}`);
const run = (command, args, cwd, env = process.env) => execFileSync(command, args, { cwd, env, stdio: ["ignore", "pipe", "inherit"], encoding: "utf8" });

let tmp;
let cluster;
let next;
let proxy;
let base;
let faulty;

/** `npm ci` unless node_modules matches the lockfile, then the packed package installed without touching either. */
function prepareApp(tarball) {
  const marker = path.join(APP, "node_modules/.package-lock.json");
  const fresh = existsSync(marker) && existsSync(NEXT) && statSync(marker).mtimeMs >= statSync(path.join(APP, "package-lock.json")).mtimeMs;
  if (!fresh) {
    log("installing the example's dependencies from its lockfile (npm ci)");
    run("npm", ["ci", "--no-audit", "--no-fund"], APP);
  }
  run("npm", ["install", "--no-save", "--no-audit", "--no-fund", "--prefer-offline", tarball], APP);
  assert.ok(existsSync(path.join(APP, "node_modules/idempotent-endpoint/dist/next.js")), "npm installed the tarball");
}

/** A free port on 127.0.0.1. */
async function freePort() {
  const server = http.createServer();
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address();
  await new Promise((r) => server.close(r));
  return port;
}

/**
 * A proxy in front of the app: of every five POSTs, one is answered 503 before it reaches the app and one
 * reaches it, is done, and its answer is lost (the connection dropped). Everything else passes through.
 */
function startProxy(target) {
  let posts = 0;
  const counts = { failed: 0, lost: 0 };
  const server = http.createServer((req, res) => {
    const n = req.method === "POST" ? posts++ % 5 : -1;
    if (n === 1) {
      counts.failed++;
      req.resume();
      res.writeHead(503, { "retry-after": "0" }).end();
      return;
    }
    const upstream = http.request(`${target}${req.url}`, { method: req.method, headers: req.headers }, (answer) => {
      if (n === 3) {
        counts.lost++;
        answer.resume();
        answer.on("end", () => res.destroy());
        return;
      }
      res.writeHead(answer.statusCode, answer.headers);
      answer.pipe(res);
    });
    upstream.on("error", () => res.destroy());
    req.pipe(upstream);
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve({ server, counts, url: `http://127.0.0.1:${server.address().port}` })));
}

before(async () => {
  tmp = mkdtempSync(path.join(tmpdir(), "idempotent-endpoint-next-"));
  const packed = JSON.parse(run("npm", ["pack", "--json", "--pack-destination", tmp], PACKAGE));
  prepareApp(path.join(tmp, packed[0].filename));
  cluster = await startCluster();
  cluster.createDatabase("next_checkout");
  const env = { ...process.env, NEXT_TELEMETRY_DISABLED: "1", DATABASE_URL: cluster.url("next_checkout") };
  log("next build");
  run(NEXT, ["build"], APP, env);
  const port = await freePort();
  next = spawn(NEXT, ["start", "-H", "127.0.0.1", "-p", String(port)], { cwd: APP, env, stdio: ["ignore", "pipe", "inherit"] });
  base = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    assert.ok(i < 300, "next start answered within 30 s");
    const up = await fetch(`${base}/api/orders`).then((r) => r.ok, () => false);
    if (up) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  faulty = await startProxy(base);
});

after(async () => {
  faulty?.server.closeAllConnections();
  faulty?.server.close();
  next?.kill("SIGTERM");
  cluster?.stop();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

describe("Next.js example checkout (next build, next start)", () => {
  it("the browser package's client through 503s and lost answers: one order per intent", async () => {
    const { IdempotentClient } = await import(pathToFileURL(path.join(PKG, "node.js")).href);
    const client = new IdempotentClient({ namespace: "next-checkout", retry: { baseDelayMs: 10, maxDelayMs: 100, maxAttempts: 30 } });
    const before = (await (await fetch(`${base}/api/orders`)).json()).count;
    const intents = 12;
    const ids = new Set();
    for (let i = 0; i < intents; i++) {
      const op = await client.begin(`checkout:cart-${i}`, { url: `${faulty.url}/api/orders`, method: "POST", headers: { "content-type": "application/json" }, body: BODY });
      const { response, ok } = await op.send();
      assert.ok(ok, `intent ${i}: ${response.status}`);
      ids.add((await response.json()).id);
    }
    assert.ok(faulty.counts.failed > 0 && faulty.counts.lost > 0, `faults injected: ${JSON.stringify(faulty.counts)}`);
    assert.equal(ids.size, intents, "each intent its own order");
    assert.equal((await (await fetch(`${base}/api/orders`)).json()).count - before, intents, "one order per intent, none twice");
  });

  it("a refusal (no sku) is a plain answer: stored with the key, replayed, no order", async () => {
    const before = (await (await fetch(`${base}/api/orders`)).json()).count;
    const post = () => fetch(`${base}/api/orders`, { method: "POST", headers: { "content-type": "application/json", "idempotency-key": "next-refusal-1" }, body: "{}" });
    const first = await post();
    assert.equal(first.status, 400);
    assert.match(first.headers.get("content-type") ?? "", /^application\/json/);
    assert.deepEqual(await first.json(), { title: "an order needs a sku" });
    const again = await post();
    assert.equal(again.status, 400);
    assert.equal(again.headers.get("idempotent-replayed"), "true");
    assert.deepEqual(await again.json(), { title: "an order needs a sku" });
    assert.equal((await (await fetch(`${base}/api/orders`)).json()).count, before, "no order");
  });

  it("passes the browser package's check", async () => {
    await assertCheckPasses(`${base}/api/orders`, "/api/idempotency-keys/{key}");
  });
});
