// The README's four framework examples as a user pastes them, against the packed package (npm pack, the
// tarball unpacked into a fresh node_modules beside this package's own dependencies): Express, Fastify and
// Hono type-checked with tsc --strict and run as written on a real PostgreSQL (PG* variables, PORT), each
// answering an order, its replay and key status; the Next.js block is the example app's route file, which
// next.test.mjs builds (next build) and drives.
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";

import pg from "pg";

import { startCluster } from "../../../tests/fault/pg-cluster.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const PACKAGE = path.join(HERE, "..");
const ROOT = path.join(PACKAGE, "../..");
const TSC = path.join(ROOT, "tools/node_modules/.bin/tsc");
const README = readFileSync(path.join(PACKAGE, "README.md"), "utf8");
const NEXT_APP = path.join(PACKAGE, "examples/next-checkout");

/** The code block under `### heading` in the README, verbatim. */
function snippet(heading) {
  const at = README.indexOf(`\n### ${heading}\n`);
  assert.ok(at >= 0, `the README has a "### ${heading}" section`);
  const block = /\n```ts\n([\s\S]*?)\n```\n/.exec(README.slice(at));
  assert.ok(block, `a ts block under "### ${heading}"`);
  return `${block[1]}\n`;
}

const SERVERS = { express: "Express 5", fastify: "Fastify 5", hono: "Hono 4" };
let tmp;
let app;
let cluster;
const running = [];

before(async () => {
  tmp = mkdtempSync(path.join(tmpdir(), "idempotent-endpoint-readme-"));
  const packed = JSON.parse(execFileSync("npm", ["pack", "--json", "--pack-destination", tmp], { cwd: PACKAGE, encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] }));
  app = path.join(tmp, "app");
  const installed = path.join(app, "node_modules/idempotent-endpoint");
  mkdirSync(installed, { recursive: true });
  execFileSync("tar", ["-xzf", path.join(tmp, packed[0].filename), "-C", installed, "--strip-components=1"]);
  // The frameworks, pg and the package's own dependencies: this package's installed ones, linked.
  for (const entry of readdirSync(path.join(PACKAGE, "node_modules"))) {
    if (entry !== "idempotent-endpoint" && !entry.startsWith(".")) symlinkSync(path.join(PACKAGE, "node_modules", entry), path.join(app, "node_modules", entry));
  }
  writeFileSync(path.join(app, "package.json"), JSON.stringify({ type: "module", private: true }));
  for (const [name, heading] of Object.entries(SERVERS)) writeFileSync(path.join(app, `${name}.mts`), snippet(heading));
  const compilerOptions = { strict: true, module: "nodenext", moduleResolution: "nodenext", target: "es2022", types: ["node"], skipLibCheck: true, outDir: "out" };
  writeFileSync(path.join(app, "tsconfig.json"), JSON.stringify({ compilerOptions, files: Object.keys(SERVERS).map((n) => `${n}.mts`) }));
  execFileSync(TSC, ["-p", app], { cwd: app, stdio: "inherit" });
  cluster = await startCluster();
  cluster.createDatabase("readme");
  const pool = new pg.Pool({ connectionString: cluster.url("readme") });
  await pool.query("CREATE TABLE orders (id SERIAL PRIMARY KEY, sku TEXT NOT NULL)");
  await pool.end();
});

after(() => {
  for (const child of running) child.kill("SIGTERM");
  cluster?.stop();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

async function freePort() {
  const server = http.createServer();
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address();
  await new Promise((r) => server.close(r));
  return port;
}

describe("the README's examples, from the packed package", () => {
  for (const name of Object.keys(SERVERS)) {
    it(`${SERVERS[name]}: type-checks, runs as written, protects POST /api/orders`, async () => {
      const port = await freePort();
      const db = new URL(cluster.url("readme"));
      const env = { ...process.env, PORT: String(port), PGHOST: db.hostname, PGPORT: db.port, PGDATABASE: "readme", PGUSER: db.username };
      const child = spawn(process.execPath, [path.join(app, "out", `${name}.mjs`)], { cwd: app, env, stdio: ["ignore", "inherit", "inherit"] });
      running.push(child);
      const base = `http://localhost:${port}`;
      const key = randomUUID();
      const post = () => fetch(`${base}/api/orders`, { method: "POST", headers: { "content-type": "application/json", "idempotency-key": key }, body: JSON.stringify({ sku: "mug" }) });
      let first;
      for (let i = 0; !first; i++) {
        assert.ok(i < 100, `${name} listened within 10 s`);
        first = await post().catch(() => undefined);
        if (!first) await new Promise((r) => setTimeout(r, 100));
      }
      assert.equal(first.status, 201, await first.clone().text());
      const order = await first.json();
      assert.equal(order.sku, "mug");
      const again = await post();
      assert.equal(again.headers.get("idempotent-replayed"), "true");
      assert.deepEqual(await again.json(), order);
      assert.equal((await (await fetch(`${base}/api/idempotency-keys/${key}`)).json()).status, "done");
    });
  }

  it("Next.js: the block is the example app's route file (built and driven by next.test.mjs)", () => {
    const route = readFileSync(path.join(NEXT_APP, "app/api/orders/route.ts"), "utf8");
    assert.ok(route.startsWith(snippet("Next.js (App Router)")), "app/api/orders/route.ts begins with the README's block");
    const status = readFileSync(path.join(NEXT_APP, "app/api/idempotency-keys/[key]/route.ts"), "utf8");
    const line = /`(export const \{ GET, POST \} = keyStatusRoute\(checkoutEndpoint\);)`/.exec(README)?.[1];
    assert.ok(line && status.includes(line), "the key-status route is the README's line");
  });
});
