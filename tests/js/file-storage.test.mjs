// Durable keys outside browsers: an app's own AsyncStorage (a Map-backed twin here), and
// idempotent-fetch-client/file (pkg/file.js) in Node. Checks: a record survives its process (SIGKILLed in a
// backoff sleep, a second process resumes it with the same key: one order on the reference server);
// crash-safe writes (no temporary file left, the format on disk); bad input (a corrupt, truncated or
// foreign record file is a STORAGE error and is left as it is; a read-only folder is a loud fallback
// to memory, and the send goes on); a lock left by a killed process is taken over; one held by a
// live process is waited for; processes beginning one intent at once agree on one key (the lock).
//
// Needs: the package (cargo xtask build) and the reference server (tests/support/reference-server.mjs).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { chmodSync, chownSync, cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync, existsSync, mkdirSync } from "node:fs";
import { createInterface } from "node:readline";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";

import { importPackage, pkgDir, root } from "../support/paths.mjs";
import { startReferenceServer } from "../support/reference-server.mjs";
import { startTestServer } from "../support/test-server.mjs";

const lib = await importPackage();
const { fileStorage } = await import(pathToFileURL(path.join(pkgDir, "file.js")).href);
const agent = path.join(root, "tests/js/file-storage/agent.mjs");
const INTENT = "tool-call:order-42"; // agent.mjs
const fast = { baseDelayMs: 1, maxDelayMs: 5 };

let tmp;
let scripted;
before(async () => {
  tmp = mkdtempSync(path.join(os.tmpdir(), "if-file-storage-"));
  chmodSync(tmp, 0o755); // the read-only case runs a child as nobody, who must reach its folder
  scripted = await startTestServer();
});
after(async () => {
  await scripted?.close();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

let counter = 0;
const fresh = () => path.join(tmp, `records-${++counter}`);
const url = (scenario, script) => `${scripted.url}/s/${scenario}-${counter}?script=${encodeURIComponent(script)}&close=1`;

/** The AsyncStorage twin in memory: the interface as an app would implement it over a Map. */
function mapStorage() {
  const map = new Map();
  const slot = (ns, id) => `${ns}\u0000${id}`;
  return {
    map,
    async get(ns, id) { return map.get(slot(ns, id)); },
    async put(ns, id, text) { map.set(slot(ns, id), text); },
    async delete(ns, id) { map.delete(slot(ns, id)); },
    async all(ns) { return [...map].filter(([k]) => k.startsWith(`${ns}\u0000`)).map(([k, v]) => [k.slice(ns.length + 1), v]); },
  };
}

test("an app's own AsyncStorage (the memory twin): keys kept across clients, typed errors and a loud fallback", async () => {
  const storage = mapStorage();
  const a = new lib.IdempotentClient({ namespace: "ns", storage, retry: fast });
  assert.equal(a.storage, "custom");
  const op = await a.begin("pay", { url: url("twin", "503,201"), body: "x" });
  assert.equal(op.durable, true, "a custom storage is durable");
  // A second client on the same storage (another process, after a restart) sees the same key.
  const b = new lib.IdempotentClient({ namespace: "ns", storage, retry: fast });
  assert.equal((await b.begin("pay", { url: url("twin", "503,201"), body: "x" })).key, op.key);
  assert.equal((await op.send()).status, 201);
  assert.deepEqual((await scripted.log(`twin-${counter}`)).map((e) => e.key), [op.key, op.key]);

  // Not text where text was stored: STORAGE, never trusted.
  storage.map.set("ns\u0000odd", 42);
  await assert.rejects(b.begin("odd", { url: url("odd", "201"), body: "x" }), (e) => e.code === "STORAGE");
  // A get that rejects: STORAGE for that operation.
  const failing = { ...mapStorage(), get: async () => { throw new Error("redis down"); } };
  const c = new lib.IdempotentClient({ namespace: "ns", storage: failing, retry: fast });
  await assert.rejects(c.begin("pay", { url: url("down", "201"), body: "x" }), (e) => e.code === "STORAGE" && /redis down/.test(e.message));
  // A put that rejects: the client continues in memory and says so; the send still happens.
  const readOnly = { ...mapStorage(), put: async () => { throw new Error("read-only"); } };
  const d = new lib.IdempotentClient({ namespace: "ns", storage: readOnly, retry: fast });
  const fallbacks = [];
  d.addEventListener("storagefallback", (e) => fallbacks.push(e.reason));
  const sent = await (await d.begin("pay", { url: url("ro", "201"), body: "x" })).send();
  assert.equal(sent.status, 201);
  assert.equal(d.storage, "memory");
  assert.match(d.storageFallback, /read-only/);
  assert.ok(fallbacks.some((r) => /read-only/.test(r)), "the storagefallback event");
  assert.equal(sent.durable, false);
  // Not an AsyncStorage: INVALID_OPTIONS naming the field.
  assert.throws(() => new lib.IdempotentClient({ storage: { get() {} } }), (e) => e.code === "INVALID_OPTIONS" && /storage/.test(e.message));
});

test("file storage: records on disk in their format, written through a temporary file, one file per intent", async () => {
  const directory = fresh();
  const client = new lib.IdempotentClient({ namespace: "acct/1", storage: fileStorage({ directory }), retry: fast });
  const op = await client.begin("pay", { url: url("disk", "503,201"), body: "x" });
  assert.equal((await op.send()).status, 201);
  const folder = path.join(directory, encodeURIComponent("acct/1"));
  const files = readdirSync(folder);
  assert.deepEqual(files.filter((f) => !/^[0-9a-f]{64}\.json$/.test(f)), [], `only record files left (no .tmp, no lock): ${files}`);
  const records = files.map((f) => JSON.parse(readFileSync(path.join(folder, f), "utf8")));
  const record = records.find((r) => r.intentId === "pay");
  assert.equal(record.format, "idempotent-fetch-file-v1");
  assert.equal(JSON.parse(record.text).key, op.key, "the key is in the record text");
  assert.ok(!readFileSync(path.join(folder, files[0]), "utf8").includes("authorization"), "no headers on disk");
  // A new client over the folder (a restart) sees the answered intent.
  const again = new lib.IdempotentClient({ namespace: "acct/1", storage: fileStorage({ directory }) });
  assert.equal((await again.intent("pay")).state, "succeeded");
});

test("a persisted body over 1 KiB in an app's storage and in files: its own entry, the same bytes after a restart, gone with the answer; altered, STORAGE and nothing sent", async () => {
  const bytes = Uint8Array.from({ length: 20_000 }, (_, i) => (i * 7) & 255);
  const base64 = Buffer.from(bytes).toString("base64");
  const options = { namespace: "acct", persistRequest: true, retry: { ...fast, maxAttempts: 1 } };
  // The memory twin of an app's AsyncStorage: the entry is dropped with a call when the intent is answered.
  const storage = mapStorage();
  const twin = new lib.IdempotentClient({ ...options, storage });
  const op = await twin.begin("pay", { url: url("twin", "503,201"), method: "POST", body: bytes });
  await assert.rejects(op.send(), { code: "RETRIES_EXHAUSTED" });
  assert.equal(storage.map.get("acct\u0000\u0001:pay"), base64, "the body's own entry");
  assert.equal(JSON.parse(storage.map.get("acct\u0000pay")).request.body, bytes.length, "the record names it by its length");
  assert.equal((await (await new lib.IdempotentClient({ ...options, storage }).resume("pay")).send()).status, 201);
  assert.deepEqual([...storage.map.keys()].filter((k) => k.includes("\u0001:")), [], "the body outlived the answer");
  assert.deepEqual((await scripted.log(`twin-${counter}`)).map((e) => e.bodyBase64), [base64, base64]);

  // Files: one client, then another over the same folder (a restarted process).
  const directory = fresh();
  const first = new lib.IdempotentClient({ ...options, storage: fileStorage({ directory }) });
  const records = () => readdirSync(path.join(directory, "acct")).map((f) => JSON.parse(readFileSync(path.join(directory, "acct", f), "utf8")));
  for (const id of ["pay", "altered"]) {
    const pending = await first.begin(id, { url: url(id, "503,201"), method: "POST", body: bytes });
    await assert.rejects(pending.send(), { code: "RETRIES_EXHAUSTED" });
  }
  const onDisk = Object.fromEntries(records().map((r) => [r.intentId, r.text]));
  assert.equal(onDisk["\u0001:pay"], base64);
  assert.equal(JSON.parse(onDisk.pay).request.body, bytes.length);
  // Same length, other bytes: the keyed fingerprint tells.
  const alteredFile = readdirSync(path.join(directory, "acct")).find((f) => JSON.parse(readFileSync(path.join(directory, "acct", f), "utf8")).intentId === "\u0001:altered");
  const altered = JSON.parse(readFileSync(path.join(directory, "acct", alteredFile), "utf8"));
  altered.text = Buffer.from(bytes.map((b) => b ^ 1)).toString("base64");
  writeFileSync(path.join(directory, "acct", alteredFile), JSON.stringify(altered));
  const restarted = new lib.IdempotentClient({ ...options, storage: fileStorage({ directory }) });
  assert.deepEqual((await restarted.pending()).map((p) => [p.intentId, p.resumable]).sort(), [["altered", true], ["pay", true]]);
  await assert.rejects(restarted.resume("altered"), { code: "STORAGE" });
  assert.equal((await scripted.log(`altered-${counter}`)).length, 1, "an altered body was sent");
  assert.equal((await (await restarted.resume("pay")).send()).status, 201);
  assert.deepEqual((await scripted.log(`pay-${counter}`)).map((e) => e.bodyBase64), [base64, base64], "the same bytes on every attempt");
  assert.deepEqual(records().map((r) => r.intentId).filter((id) => id.startsWith("\u0001:")), ["\u0001:altered"], "the answered intent's body file is left");
  assert.equal(await restarted.discard("altered"), true);
  assert.deepEqual(records().map((r) => r.intentId).sort(), ["\u0001secret", "pay"], "discard left the body file");
});

test("file storage bad input: corrupt, truncated or foreign files are STORAGE errors and left as they are; pending() skips them", async () => {
  const directory = fresh();
  const client = new lib.IdempotentClient({ namespace: "ns", storage: fileStorage({ directory }), retry: fast });
  const request = { url: url("bad", "201"), body: "x" };
  await (await client.begin("good", request)).send();
  const pendingOp = await client.begin("later", { url: url("later", "201"), body: "y" });
  const folder = path.join(directory, "ns");
  const records = () => readdirSync(folder).filter((f) => /^[0-9a-f]{64}\.json$/.test(f)).map((f) => path.join(folder, f));
  const fileOf = (id) => records().find((f) => JSON.parse(readFileSync(f, "utf8")).intentId === id);
  const target = fileOf("later");
  const original = readFileSync(target, "utf8");
  for (const [label, content] of [
    ["corrupt", "{not json"],
    ["truncated", original.slice(0, Math.floor(original.length / 2))],
    ["foreign", JSON.stringify({ hello: "world" })],
    ["another intent's", readFileSync(fileOf("good"), "utf8")],
  ]) {
    writeFileSync(target, content);
    const reader = new lib.IdempotentClient({ namespace: "ns", storage: fileStorage({ directory }), retry: fast });
    await assert.rejects(reader.begin("later", { url: url("later", "201"), body: "y" }), (e) => e.code === "STORAGE", `${label} file: STORAGE`);
    assert.equal(readFileSync(target, "utf8"), content, `${label} file left as it is`);
    assert.deepEqual((await reader.pending()).map((p) => p.intentId), [], `${label} file skipped by pending()`);
  }
  writeFileSync(path.join(folder, "notes.txt"), "someone else's file");
  writeFileSync(target, original);
  const restored = new lib.IdempotentClient({ namespace: "ns", storage: fileStorage({ directory }), retry: fast });
  assert.deepEqual((await restored.pending()).map((p) => p.key), [pendingOp.key], "the restored file is read again; other files are ignored");
});

test("file storage in a read-only folder: a loud fallback to memory, the send goes on, what is on disk stays", async () => {
  const directory = fresh();
  // A record first, then the folder made read-only (as nobody when this runs as root: root ignores modes).
  const seed = new lib.IdempotentClient({ namespace: "ns", storage: fileStorage({ directory }) });
  const kept = await seed.begin("kept", { url: url("kept", "201"), body: "x" });
  const asRoot = process.getuid?.() === 0;
  if (asRoot) {
    for (const p of [directory, path.join(directory, "ns"), ...readdirSync(path.join(directory, "ns")).map((f) => path.join(directory, "ns", f))]) chownSync(p, 65534, 65534);
  }
  chmodSync(path.join(directory, "ns"), 0o555);
  const script = `
    const { IdempotentClient } = await import(${JSON.stringify(pathToFileURL(path.join(pkgDir, "node.js")).href)});
    const { fileStorage } = await import(${JSON.stringify(pathToFileURL(path.join(pkgDir, "file.js")).href)});
    const client = new IdempotentClient({ namespace: "ns", storage: fileStorage({ directory: ${JSON.stringify(directory)} }), retry: { baseDelayMs: 1, maxDelayMs: 5 } });
    const events = [];
    client.addEventListener("storagefallback", (e) => events.push(e.reason));
    const result = await (await client.begin("new", { url: ${JSON.stringify(url("ro-file", "201"))}, body: "x" })).send();
    const durable = await new IdempotentClient({ namespace: "ns", storage: fileStorage({ directory: ${JSON.stringify(directory)} }), requireDurable: true })
      .begin("strict", { url: ${JSON.stringify(url("strict", "201"))}, body: "x" }).then(() => null, (e) => e.code);
    console.log(JSON.stringify({ status: result.status, durable: result.durable, storage: client.storage, reason: client.storageFallback, events, strict: durable,
      pending: (await client.pending()).map((p) => p.intentId) }));`;
  // Not spawnSync: this process's test server must answer the child meanwhile.
  const child = spawn(process.execPath, ["--input-type=module", "-e", script], { ...(asRoot ? { uid: 65534, gid: 65534 } : {}) });
  const out = { stdout: "", stderr: "" };
  child.stdout.on("data", (d) => { out.stdout += d; });
  child.stderr.on("data", (d) => { out.stderr += d; });
  out.status = await new Promise((resolve) => child.on("exit", resolve));
  chmodSync(path.join(directory, "ns"), 0o755);
  assert.equal(out.status, 0, out.stderr);
  const seen = JSON.parse(out.stdout.trim().split("\n").pop());
  assert.equal(seen.status, 201, "the send went on");
  assert.equal(seen.durable, false);
  assert.equal(seen.storage, "memory");
  assert.match(seen.reason, /storage\.put failed: .*(EACCES|permission)/i, "the reason names the failed write");
  assert.ok(seen.events.length >= 1, "the storagefallback event");
  assert.equal(seen.strict, "NOT_DURABLE", "requireDurable: a typed error instead");
  assert.ok(seen.pending.includes("kept"), "what was on disk is carried into memory");
  assert.equal((await seed.intent("kept")).key, kept.key, "and stays on disk");
});

test("file storage lock: one left by a killed process is taken over; one held by a live process is waited for", async () => {
  const directory = fresh();
  const folder = path.join(directory, "ns");
  mkdirSync(folder, { recursive: true });
  const gone = spawnSync(process.execPath, ["-e", "console.log(process.pid)"], { encoding: "utf8" });
  writeFileSync(path.join(folder, ".lock"), `${gone.stdout.trim()} deadbeef`);
  const storage = fileStorage({ directory });
  await storage.put("ns", "a", "text-a"); // would wait forever if the dead owner's lock were honoured
  assert.equal(await storage.get("ns", "a"), "text-a");
  assert.ok(!existsSync(path.join(folder, ".lock")), "released");

  writeFileSync(path.join(folder, ".lock"), `${process.pid} cafebabe`); // a live owner (this process)
  let done = false;
  const put = storage.put("ns", "b", "text-b").then(() => { done = true; });
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(done, false, "waits while the live owner holds it");
  rmSync(path.join(folder, ".lock"));
  await put;
  assert.equal(await storage.get("ns", "b"), "text-b");
});

/** Starts agent.mjs (or `script` in `cwd`); resolves each JSON line through `onEvent`; `exited`
 *  resolves to the exit signal or code. */
function startAgent(args, { script = agent, cwd = undefined } = {}) {
  const child = spawn(process.execPath, [script, ...args], { stdio: ["ignore", "pipe", "pipe"], cwd });
  const events = [];
  const waiters = [];
  let stderr = "";
  child.stderr.on("data", (d) => { stderr += d; });
  createInterface({ input: child.stdout }).on("line", (line) => {
    const event = JSON.parse(line);
    events.push(event);
    for (const w of waiters.splice(0)) w();
  });
  const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve(signal ?? code)));
  const until = async (predicate, what) => {
    const deadline = Date.now() + 30_000;
    while (!events.some(predicate)) {
      if (Date.now() > deadline) throw new Error(`agent: no ${what} (${JSON.stringify(events)})\n${stderr}`);
      await Promise.race([new Promise((r) => waiters.push(r)), new Promise((r) => setTimeout(r, 200))]);
    }
    return events.find(predicate);
  };
  return { child, events, until, exited, stderr: () => stderr };
}

test("an agent's process is SIGKILLed mid-retry; a second process resumes with the same key: one order", { timeout: 90_000 }, async () => {
  const server = await startReferenceServer({ www: tmp, label: "file-storage" });
  try {
    const account = "acct_agent";
    const token = await server.session(account);
    const directory = fresh();
    const args = [pkgDir, directory, server.url, token, account];
    await server.setFaults({ failBeforeWork: 1 }); // the server is down: the agent retries
    const first = startAgent(args);
    const { key } = await first.until((e) => e.event === "key", "key");
    await first.until((e) => e.event === "retry", "retry");
    first.child.kill("SIGKILL");
    assert.equal(await first.exited, "SIGKILL", "killed, mid-retry");
    assert.deepEqual(await server.orders(account), [], "no order yet");

    await server.setFaults({ dropAfterCommit: 0.5 }); // back, and losing half its answers
    const second = startAgent(args);
    const resumed = await second.until((e) => e.event === "key", "key");
    assert.equal(resumed.key, key, "the same key after the crash");
    assert.equal(resumed.resumed, true);
    assert.equal(resumed.storage, "custom");
    const done = await second.until((e) => e.event === "done" || e.event === "error", "answer");
    assert.equal(done.event, "done", JSON.stringify(done));
    assert.equal(done.key, key);
    assert.equal(done.durable, true);
    await second.exited;
    const orders = await server.orders(account);
    assert.equal(orders.length, 1, "one order");
    assert.equal(orders[0].idempotencyKey, key, "the order carries the key");
    assert.equal(done.order.id, orders[0].id);
    console.log(`agent: killed after ${first.events.filter((e) => e.event === "retry").length} retries; resumed with ${key}; order ${orders[0].id}`);
  } finally {
    await server.setFaults({}).catch(() => {});
    await server.stop();
  }
});

/** The README's tool-call recipe (the ```js block that calls `toolCallIntent`), as written, in an
 *  app folder whose node_modules holds the package and canonicalize, as `npm install` would (the
 *  package copied, not linked: its agent entry finds canonicalize next to it, as installed). */
function recipeApp() {
  const readme = readFileSync(path.join(root, "README.md"), "utf8");
  const block = [...readme.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]).find((code) => code.includes("toolCallIntent("));
  assert.ok(block, "the README has the tool-call recipe");
  const app = path.join(tmp, `recipe-${++counter}`);
  mkdirSync(path.join(app, "node_modules"), { recursive: true });
  cpSync(pkgDir, path.join(app, "node_modules/idempotent-fetch-client"), { recursive: true });
  symlinkSync(path.join(root, "tools/node_modules/canonicalize"), path.join(app, "node_modules/canonicalize"));
  writeFileSync(path.join(app, "recipe.mjs"), block);
  return app;
}

test("the README's agent recipe: an agent killed after the order, restarted and re-planning the call with a new tool-call id, makes one order", { timeout: 90_000 }, async () => {
  const server = await startReferenceServer({ www: tmp, label: "file-storage-replan" });
  try {
    const account = "acct_replan";
    const token = await server.session(account);
    const app = recipeApp();
    const replan = path.join(root, "tests/js/file-storage/replan.mjs");
    const run = (toolCallId, order) =>
      startAgent([path.join(app, "recipe.mjs"), server.url, token, "run-7f3a", toolCallId, JSON.stringify(order)], { script: replan, cwd: app });
    await server.setFaults({ dropAfterCommit: 1 }); // every order is made and its answer lost
    const first = run("call_1", { items: [{ sku: "mug", qty: 2 }, { sku: "filter-papers", qty: 1 }] });
    const { key } = await first.until((e) => e.event === "key", "key");
    await first.until((e) => e.event === "retry", "retry");
    first.child.kill("SIGKILL");
    assert.equal(await first.exited, "SIGKILL", "killed after the server made the order");
    assert.equal((await server.orders(account)).length, 1, "the order exists, its answer lost");

    await server.setFaults({});
    // The restarted agent re-plans the call: the model mints a new id, and writes the same
    // arguments in another key order.
    const second = run("call_3", { items: [{ qty: 2, sku: "mug" }, { qty: 1, sku: "filter-papers" }] });
    const resumed = await second.until((e) => e.event === "key", "key");
    assert.equal(resumed.key, key, "the same intent, the same key, whatever the tool-call id");
    const done = await second.until((e) => e.event === "done" || e.event === "error", "answer");
    assert.equal(done.event, "done", JSON.stringify(done) + second.stderr());
    await second.exited;
    const orders = await server.orders(account);
    assert.equal(orders.length, 1, "one order");
    assert.equal(orders[0].idempotencyKey, key);
    assert.equal(done.order.id, orders[0].id, "the replayed answer is that order");
  } finally {
    await server.setFaults({}).catch(() => {});
    await server.stop();
  }
});

test("four agent processes begin one intent at the same moment over one folder: one key, one order", { timeout: 90_000 }, async () => {
  const server = await startReferenceServer({ www: tmp, label: "file-storage-race" });
  try {
    const account = "acct_race";
    const token = await server.session(account);
    const directory = fresh(); // a new namespace too: the four also race for its fingerprint secret
    const args = [pkgDir, directory, server.url, token, account];
    await server.setFaults({ dropAfterCommit: 0.3 });
    const agents = Array.from({ length: 4 }, () => startAgent(args));
    const keys = await Promise.all(agents.map((a) => a.until((e) => e.event === "key" || e.event === "error", "key")));
    const done = await Promise.all(agents.map((a) => a.until((e) => e.event === "done" || e.event === "error", "answer")));
    await Promise.all(agents.map((a) => a.exited));
    assert.deepEqual(keys.map((k) => k.event), ["key", "key", "key", "key"], JSON.stringify(keys));
    assert.equal(new Set(keys.map((k) => k.key)).size, 1, `one key for the four: ${JSON.stringify(keys)}`);
    assert.equal(keys.filter((k) => !k.resumed).length, 1, "one process minted it, the other three resumed it");
    assert.deepEqual(done.map((d) => d.event), ["done", "done", "done", "done"], JSON.stringify(done));
    const orders = await server.orders(account);
    assert.equal(orders.length, 1, "one order");
    assert.equal(orders[0].idempotencyKey, keys[0].key);
    assert.ok(done.every((d) => d.order.id === orders[0].id), "every process got that order");
    assert.deepEqual(readdirSync(path.join(directory, account)).filter((f) => f.startsWith(".lock")), [], "no lock file left");
  } finally {
    await server.setFaults({}).catch(() => {});
    await server.stop();
  }
});

test("idempotent-fetch-client/agent: the same run, tool and arguments in any key order name one intent and one key; anything else another", async () => {
  const app = recipeApp();
  const agent = await import(pathToFileURL(path.join(app, "node_modules/idempotent-fetch-client/agent.js")).href);
  const args = { items: [{ sku: "mug", qty: 2 }], note: "gift", total: { cents: 1800, currency: "EUR" } };
  const reordered = { total: { currency: "EUR", cents: 1800 }, note: "gift", items: [{ qty: 2, sku: "mug" }] };
  const intent = agent.toolCallIntent("run_7f2c", "place_order", args);
  assert.match(intent, /^run_7f2c:place_order:[A-Za-z0-9_-]{43}$/);
  assert.equal(agent.toolCallIntent("run_7f2c", "place_order", reordered), intent, "key order does not matter");
  assert.notEqual(agent.toolCallIntent("run_7f2c", "place_order", { ...args, note: "other" }), intent);
  assert.notEqual(agent.toolCallIntent("run_8", "place_order", args), intent);
  assert.notEqual(agent.toolCallIntent("run_7f2c", "refund", args), intent);
  const key = agent.toolCallKey("run_7f2c", "place_order", args);
  assert.match(key, /^[A-Za-z0-9_-]{43}$/, "a key begin accepts");
  assert.equal(agent.toolCallKey("run_7f2c", "place_order", reordered), key);
  assert.notEqual(key, intent.split(":")[2], "the key is not the intent's hash");
  assert.equal(agent.canonicalArgs(reordered), agent.canonicalArgs(args));
  assert.throws(() => agent.toolCallIntent("", "place_order", args), TypeError);
  assert.throws(() => agent.toolCallIntent("run:1", "place_order", args), TypeError);
  assert.throws(() => agent.toolCallIntent("run", "place_order", () => 1), TypeError);
  // The key goes into begin as a brought key.
  const { IdempotentClient } = await import(pathToFileURL(path.join(app, "node_modules/idempotent-fetch-client/node.js")).href);
  const op = await new IdempotentClient({ namespace: "agent" }).begin(intent, { url: "http://127.0.0.1:9/x", body: "{}" }, { key });
  assert.equal(op.key, key);
});
