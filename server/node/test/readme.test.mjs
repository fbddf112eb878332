// Every TypeScript block of the README as a user pastes it, against the packed package (npm pack, the
// tarball unpacked into a fresh node_modules beside this package's own dependencies), type-checked with
// tsc --strict:
// - Express, Fastify and Hono: whole servers, run as written on a real PostgreSQL (PG* variables, PORT),
//   each answering an order, its replay and key status;
// - the Drizzle block, and the same with its Kysely line in place of the Drizzle one, the outbox and inbox
//   blocks (one app: an invite's email delivered to its own /messages), and the atomic phases block: run
//   after a prelude that declares what the block takes as given (`app`, `endpoint`, `pool`, the `orders`
//   table, `provider`, ...; the PRELUDES below) and a line that listens on PORT;
// - the Prisma block: type-checked only (module resolution "bundler", as its extensionless import of the
//   generated client needs), against a client `prisma generate` writes here (the schema engine a stub, as
//   in prisma.test.mjs); prisma.test.mjs runs the adapter itself;
// - the Next.js block: the example app's route file, which next.test.mjs builds (next build) and drives.
// A TypeScript block this file does not know fails it.
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
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

const TS_BLOCK = /\n```ts\n([\s\S]*?)\n```\n/g;

/** The ts blocks of the README's section `heading` (`## ...` or `### ...`, to the next heading), verbatim. */
function blocks(heading) {
  const at = README.indexOf(`\n${heading}\n`);
  assert.ok(at >= 0, `the README has a "${heading}" section`);
  const rest = README.slice(at + heading.length + 2);
  const end = rest.search(/\n##/);
  const found = [...`\n${end < 0 ? rest : rest.slice(0, end + 1)}`.matchAll(TS_BLOCK)].map((m) => `${m[1]}\n`);
  assert.ok(found.length > 0, `a ts block under "${heading}"`);
  return found;
}

/** The code block under `### heading` in the README, verbatim. */
const snippet = (heading) => blocks(`### ${heading}`)[0];

const SERVERS = { express: "Express 5", fastify: "Fastify 5", hono: "Hono 4" };

/** What the fragment blocks take as given, declared before them; the tables are the test's. */
const PRELUDES = {
  orm: `import express from "express";
import pg from "pg";
import type { Generated } from "kysely";
import { pgTable, serial, text } from "drizzle-orm/pg-core";
import { idempotent, idempotentEndpoint, keyStatusRoutes } from "idempotent-endpoint";
const orders = pgTable("orders", { id: serial("id").primaryKey(), sku: text("sku").notNull() });
interface DB { orders: { id: Generated<number>; sku: string } }
const endpoint = idempotentEndpoint({ database: new pg.Pool() });
await endpoint.install();
const app = express();
keyStatusRoutes(app, endpoint, { path: "/api/idempotency-keys/:key" });
`,
  messages: `import express from "express";
import pg from "pg";
import { idempotent, idempotentEndpoint } from "idempotent-endpoint";
const pool = new pg.Pool();
const endpoint = idempotentEndpoint({ database: pool });
await endpoint.install();
const app = express();
const mailUrl = \`http://localhost:\${process.env.PORT}/messages\`;
const abortController = new AbortController();
`,
  phases: `import express from "express";
import pg from "pg";
const pool = new pg.Pool();
const app = express();
const abortController = new AbortController();
// A payment provider that honours idempotency keys: one charge per key.
const charged = new Map<string, { id: string; amount: number }>();
const provider = {
  async charge(amount: number, key: string) {
    if (!charged.has(key)) charged.set(key, { id: \`ch_\${charged.size + 1}\`, amount });
    return charged.get(key)!;
  },
};
`,
  prisma: `import express from "express";
import { idempotent, idempotentEndpoint } from "idempotent-endpoint";
const app = express();
`,
};
const LISTEN = "app.listen(Number(process.env.PORT));\n";
const TABLES = [
  "CREATE TABLE orders (id SERIAL PRIMARY KEY, sku TEXT NOT NULL)",
  "CREATE TABLE invites (id SERIAL PRIMARY KEY, email TEXT NOT NULL)",
  "CREATE TABLE mails (recipient TEXT NOT NULL)",
  "CREATE TABLE payments (key_row_id TEXT PRIMARY KEY, amount INTEGER NOT NULL, charge_id TEXT NULL)",
];
const PRISMA_SCHEMA = `generator client {
  provider = "prisma-client"
  output   = "./generated/prisma"
}
datasource db {
  provider = "postgresql"
}
model Order {
  id  Int    @id @default(autoincrement())
  sku String
  @@map("orders")
}
`;

/** The Drizzle block with its commented Kysely line in place of the Drizzle line. */
function asKysely(block) {
  const swapped = block.replace(/^( *)const \[order\] = await drizzleTx\(.*\n *\/\/ or: (.*)$/m, "$1$2");
  assert.notEqual(swapped, block, "the Drizzle block has a Drizzle line followed by an `// or:` Kysely line");
  return swapped;
}
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
  const [drizzle, prismaBlock] = blocks("## Drizzle, Kysely and Prisma");
  const [outbox, inbox] = blocks("## Work that leaves the database: the outbox and the inbox");
  const [phases] = blocks("## Work that calls a service and needs its answer: atomic phases");
  const sources = {
    ...Object.fromEntries(Object.entries(SERVERS).map(([name, heading]) => [name, snippet(heading)])),
    drizzle: PRELUDES.orm + drizzle + LISTEN,
    kysely: PRELUDES.orm + asKysely(drizzle) + LISTEN,
    messages: PRELUDES.messages + outbox + inbox + LISTEN,
    phases: PRELUDES.phases + phases + LISTEN,
  };
  const covered = [...Object.values(SERVERS).map(snippet), snippet("Next.js (App Router)"), drizzle, prismaBlock, outbox, inbox, phases];
  const all = [...README.matchAll(TS_BLOCK)].map((m) => `${m[1]}\n`);
  assert.deepEqual(all.filter((b) => !covered.includes(b)), [], "every ts block of the README is one this test knows");
  for (const [name, source] of Object.entries(sources)) writeFileSync(path.join(app, `${name}.mts`), source);
  const compilerOptions = { strict: true, module: "nodenext", moduleResolution: "nodenext", target: "es2022", types: ["node"], skipLibCheck: true, outDir: "out" };
  writeFileSync(path.join(app, "tsconfig.json"), JSON.stringify({ compilerOptions, files: Object.keys(sources).map((n) => `${n}.mts`) }));
  execFileSync(TSC, ["-p", app], { cwd: app, stdio: "inherit" });
  typeCheckPrisma(path.join(app, "prisma"), PRELUDES.prisma + prismaBlock + LISTEN);
  cluster = await startCluster();
  cluster.createDatabase("readme");
  const pool = new pg.Pool({ connectionString: cluster.url("readme") });
  for (const table of TABLES) await pool.query(table);
  await pool.end();
}, { timeout: 180_000 });

/** Generates a Prisma client for an `orders` table in `dir` and type-checks `source` beside it. */
function typeCheckPrisma(dir, source) {
  mkdirSync(dir);
  writeFileSync(path.join(dir, "schema.prisma"), PRISMA_SCHEMA);
  const stub = path.join(dir, "schema-engine");
  writeFileSync(stub, "#!/bin/sh\necho 'the test has no Prisma schema engine' >&2\nexit 1\n");
  chmodSync(stub, 0o755);
  const cli = path.join(PACKAGE, "node_modules/prisma/build/index.js");
  execFileSync(process.execPath, [cli, "generate", "--schema", path.join(dir, "schema.prisma")], {
    cwd: dir,
    env: { ...process.env, PRISMA_SCHEMA_ENGINE_BINARY: stub, CHECKPOINT_DISABLE: "1", PRISMA_HIDE_UPDATE_MESSAGE: "1" },
    stdio: ["ignore", "pipe", "inherit"],
  });
  writeFileSync(path.join(dir, "server.mts"), source);
  const compilerOptions = { strict: true, module: "esnext", moduleResolution: "bundler", allowImportingTsExtensions: true, noEmit: true, target: "es2022", types: ["node"], skipLibCheck: true };
  writeFileSync(path.join(dir, "tsconfig.json"), JSON.stringify({ compilerOptions, files: ["server.mts"] }));
  execFileSync(TSC, ["-p", dir], { cwd: dir, stdio: "inherit" });
}

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

/** Runs out/<name>.mjs as written (PG* variables, PORT); resolves to its base URL once it answers. */
async function serve(name) {
  const port = await freePort();
  const db = new URL(cluster.url("readme"));
  const env = { ...process.env, PORT: String(port), PGHOST: db.hostname, PGPORT: db.port, PGDATABASE: "readme", PGUSER: db.username };
  const child = spawn(process.execPath, [path.join(app, "out", `${name}.mjs`)], { cwd: app, env, stdio: ["ignore", "inherit", "inherit"] });
  running.push(child);
  const base = `http://localhost:${port}`;
  for (let i = 0; !(await fetch(base).then(() => true, () => false)); i++) {
    assert.ok(i < 100 && child.exitCode === null, `${name} listened within 10 s`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return base;
}

const keyedPost = (url, key, body) =>
  fetch(url, { method: "POST", headers: { "content-type": "application/json", "idempotency-key": key }, body: JSON.stringify(body) });

/** POSTs `body` with a new key: 201, then the same again replayed; resolves to the answer's body. */
async function onceAndReplayed(base, route, body, { keyStatus = true } = {}) {
  const key = randomUUID();
  const first = await keyedPost(`${base}${route}`, key, body);
  assert.equal(first.status, 201, await first.clone().text());
  const answer = await first.json();
  const again = await keyedPost(`${base}${route}`, key, body);
  assert.equal(again.status, 201);
  assert.equal(again.headers.get("idempotent-replayed"), "true");
  assert.deepEqual(await again.json(), answer);
  if (keyStatus) assert.equal((await (await fetch(`${base}/api/idempotency-keys/${key}`)).json()).status, "done");
  return answer;
}

async function query(text, params) {
  const pool = new pg.Pool({ connectionString: cluster.url("readme") });
  try {
    return (await pool.query(text, params)).rows;
  } finally {
    await pool.end();
  }
}

describe("the README's examples, from the packed package", () => {
  for (const name of Object.keys(SERVERS)) {
    it(`${SERVERS[name]}: type-checks, runs as written, protects POST /api/orders`, async () => {
      const order = await onceAndReplayed(await serve(name), "/api/orders", { sku: "mug" });
      assert.equal(order.sku, "mug");
      assert.deepEqual(await query("SELECT sku FROM orders WHERE id = $1", [order.id]), [{ sku: "mug" }]);
    });
  }

  for (const name of ["drizzle", "kysely"]) {
    it(`the ${name === "drizzle" ? "Drizzle block" : "Drizzle block with its Kysely line"}: type-checks, runs, writes the order through the key row's transaction`, async () => {
      const order = await onceAndReplayed(await serve(name), "/api/orders", { sku: name });
      assert.deepEqual(order, { id: order.id, sku: name });
      assert.deepEqual(await query("SELECT sku FROM orders WHERE id = $1", [order.id]), [{ sku: name }]);
    });
  }

  it("the outbox and inbox blocks: an invite's email delivered once, a re-delivery refused by the inbox", async () => {
    const base = await serve("messages");
    const invite = await onceAndReplayed(base, "/api/invites", { email: "ann@example.com" }, { keyStatus: false });
    let mails = [];
    for (let i = 0; mails.length === 0; i++) {
      assert.ok(i < 100, "the worker delivered the email within 10 s");
      await new Promise((r) => setTimeout(r, 100));
      mails = await query("SELECT recipient FROM mails");
    }
    assert.deepEqual(mails, [{ recipient: "ann@example.com" }]);
    const [message] = await query("SELECT id, payload FROM outbox_messages");
    assert.equal(JSON.parse(message.payload).invite, invite.id);
    // The message again, as a worker that crashed before its mark sends it: answered, not done again.
    const again = await fetch(`${base}/messages`, { method: "POST", headers: { "content-type": "application/json", "idempotency-key": message.id }, body: message.payload });
    assert.equal(again.status, 202);
    assert.equal(again.headers.get("idempotent-replayed"), "true");
    assert.deepEqual(await query("SELECT recipient FROM mails"), [{ recipient: "ann@example.com" }]);
  });

  it("the atomic phases block: type-checks, runs, one charge recorded, the answer replayed", async () => {
    const payment = await onceAndReplayed(await serve("phases"), "/api/payments", { amount: 500 }, { keyStatus: false });
    assert.equal(payment.amount, 500);
    assert.equal(payment.charge_id, "ch_1");
    assert.deepEqual(await query("SELECT amount, charge_id FROM payments"), [{ amount: 500, charge_id: "ch_1" }]);
  });

  it("Next.js: the block is the example app's route file (built and driven by next.test.mjs)", () => {
    const route = readFileSync(path.join(NEXT_APP, "app/api/orders/route.ts"), "utf8");
    assert.ok(route.startsWith(snippet("Next.js (App Router)")), "app/api/orders/route.ts begins with the README's block");
    const status = readFileSync(path.join(NEXT_APP, "app/api/idempotency-keys/[key]/route.ts"), "utf8");
    const line = /`(export const \{ GET, POST \} = keyStatusRoute\(checkoutEndpoint\);)`/.exec(README)?.[1];
    assert.ok(line && status.includes(line), "the key-status route is the README's line");
  });
});
