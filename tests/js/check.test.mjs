// `idempotent-fetch-client check <url>`, the conformance check, run as users run it: the packed tarball
// installed into a temporary app and started with `npx idempotent-fetch-client check ...`, a separate
// process sending real HTTP to servers on 127.0.0.1.
//
//   - the reference server (sessions, CORS for a page origin, a 300 ms latency while a key is in
//     flight so the concurrent case meets its 409s): every case passes, exit status 0;
//   - examples/invite, the app on the server library alone: no case fails (exit status 0); it sends
//     no CORS headers (not asked: no --origin) and validates a body before taking its key (so case 4
//     cannot show a stored failure);
//   - small servers written here on node:http, one correct and three each broken in one way (no
//     in-flight lock: check-then-insert with an await between; no replay marker; no fingerprint
//     check): the check fails the broken case, names it, and passes the cases each one honours; and
//     one that refuses the sf-string key form, has no "unknown" key status and hides its headers
//     from a page: cases 5, 6 and 8 fail; and one without the settle request (no fence): case 7 fails,
//     saying what `replace` costs there;
//   - usage errors and an endpoint it cannot check: exit status 2 with a message.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";

import { packPackage } from "../support/packed.mjs";
import { pkgMissing, requirePrerequisites } from "../support/paths.mjs";
import { serverBinary, startReferenceServer, startService } from "../support/reference-server.mjs";

const ORIGIN = "https://page.example";
const ORDER = JSON.stringify({ items: [{ sku: "mug", qty: 1 }] });
const TIMEOUT_MS = 120_000;
const CASES = [1, 2, 3, 4, 5, 6, 7, 8];

let tmpDir;
let app;

before(async () => {
  requirePrerequisites("the check tests", [pkgMissing()]);
  serverBinary(); // builds it now when missing, not inside a test's timeout
  tmpDir = mkdtempSync(path.join(os.tmpdir(), "if-check-"));
  const packDir = path.join(tmpDir, "pack");
  mkdirSync(packDir);
  const { tarball, files } = packPackage(packDir);
  assert.ok(files.includes("bin/check.mjs"), `the tarball ships the check: ${files.join(", ")}`);
  app = path.join(tmpDir, "app");
  mkdirSync(app);
  writeFileSync(path.join(app, "package.json"), JSON.stringify({ name: "check-app", private: true, version: "0.0.0" }));
  const installed = await runChecked("npm", ["install", "--no-audit", "--no-fund", "--offline", tarball], app);
  assert.match(installed, /added \d+ package/);
});

after(() => {
  if (tmpDir) rmSync(tmpDir, { recursive: true, force: true });
});

/** Runs a command; resolves to its output, rejects with it on a non-zero exit. */
function runChecked(command, args, cwd) {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout.on("data", (chunk) => { out += chunk; });
    child.stderr.on("data", (chunk) => { out += chunk; });
    child.on("error", reject);
    child.on("exit", (code) => (code === 0 ? resolve(out) : reject(new Error(`${command} ${args.join(" ")} exited ${code}\n${out}`))));
  });
}

/** `npx idempotent-fetch-client <args>` in the app (never a download: `--no`); resolves to { status, stdout, stderr }. */
function check(args) {
  return new Promise((resolve, reject) => {
    const child = spawn("npx", ["--no", "idempotent-fetch-client", ...args], { cwd: app, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => { stdout += chunk; });
    child.stderr.on("data", (chunk) => { stderr += chunk; });
    child.on("error", reject);
    child.on("exit", (status) => resolve({ status, stdout, stderr }));
  });
}

/** The check with --json: the exit status and the rows by case number. */
async function checkJson(args) {
  const run = await check([...args, "--json"]);
  assert.match(run.stderr, /real requests.*test instance/s, "the check warns that it sends real requests");
  let report;
  try {
    report = JSON.parse(run.stdout);
  } catch {
    assert.fail(`not JSON (exit ${run.status}):\n${run.stdout}\n${run.stderr}`);
  }
  console.log(report.cases.map((row) => `  ${row.id} ${row.verdict} ${row.name}: ${row.seen}${row.fix ? ` | fix: ${row.fix}` : ""}`).join("\n"));
  return { status: run.status, report, rows: new Map(report.cases.map((row) => [row.id, row])) };
}

/** The bursts case 3 sent: one, or more when the earlier ones did not overlap (each made one effect). */
function bursts(rows) {
  return Number(/\(burst (\d) of \d: the earlier/.exec(rows.get(3).seen)?.[1] ?? 1);
}

function assertVerdicts(rows, expected, label) {
  for (const id of CASES) {
    assert.equal(rows.get(id)?.verdict, expected[id] ?? "PASS", `${label}: case ${id} (${rows.get(id)?.name}): ${rows.get(id)?.seen}`);
  }
}

const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A small keyed-order server on 127.0.0.1 (POST /orders, GET /keys/{key}, POST /keys/{key} to settle,
 * CORS for ORIGIN) that
 * honours the protocol, except for its `flaws`:
 *   "lock"         checks for the key, does the work (an await), then inserts: no in-flight lock
 *   "marker"       replays without Idempotent-Replayed
 *   "fingerprint"  replays the stored answer whatever the body
 *   "sf-string"    refuses a key in the IETF form ("k") as malformed
 *   "status-404"   answers 404 for a key it does not know, instead of {"status": "unknown"}
 *   "hidden"       exposes no header to a cross-origin page
 *   "no-fence"     has no settle request (POST /keys/{key} is 405)
 *   "busy-502"     refuses a key in flight with 502 (no Retry-After) instead of 409
 *   "no-retry-after"  refuses a key in flight with 409 without Retry-After
 *   "replay-409"   replays a done key with 409 and the first answer's body, unmarked; stores only 2xx
 *                  answers (django-idempotency-key's way)
 * and the way it works:
 *   "fast"         the work takes no time (an await of 0 ms) instead of 200 ms
 *   "serial"       one request at a time (a single worker), so requests never overlap in it
 * Resolves to { url, stop(), effects }: `effects` counts the work done per key.
 */
function startMiniServer(...flaws) {
  const flaw = (name) => flaws.includes(name);
  const keys = new Map();
  const effects = new Map();
  let orders = 0;
  let queue = Promise.resolve();
  const server = http.createServer((req, res) => {
    if (!flaw("serial")) return handle(req, res);
    queue = queue.then(() => new Promise((done) => {
      res.once("close", done);
      handle(req, res);
    }));
  });
  async function handle(req, res) {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const body = Buffer.concat(chunks).toString("utf8");
    const send = (status, json, headers = {}) => {
      const text = typeof json === "string" ? json : JSON.stringify(json);
      res.writeHead(status, { "content-type": "application/json", ...headers }).end(text);
    };
    if (req.headers.origin === ORIGIN) {
      res.setHeader("access-control-allow-origin", ORIGIN);
      if (!flaw("hidden")) res.setHeader("access-control-expose-headers", "Idempotent-Replayed, Retry-After");
    }
    const url = new URL(req.url, "http://127.0.0.1");
    if (req.method === "OPTIONS") {
      res.setHeader("access-control-allow-methods", "POST");
      res.setHeader("access-control-allow-headers", "Idempotency-Key, Content-Type");
      return res.writeHead(204).end();
    }
    if (req.method === "POST" && url.pathname.startsWith("/keys/")) {
      if (flaw("no-fence")) return send(405, { error: "method not allowed" });
      const key = decodeURIComponent(url.pathname.slice("/keys/".length));
      if (!keys.has(key)) keys.set(key, { fenced: true });
    }
    if (url.pathname.startsWith("/keys/") && (req.method === "GET" || req.method === "POST")) {
      const found = keys.get(decodeURIComponent(url.pathname.slice("/keys/".length)));
      if (!found) return flaw("status-404") ? send(404, { error: "no such key" }) : send(200, { status: "unknown" });
      if (found.fenced) return send(200, { status: "fenced" });
      if (!found.answer) return send(200, { status: "in_flight" }, { "retry-after": "1" });
      const { status, text } = found.answer;
      return send(200, { status: "done", response: { status, headers: { "content-type": "application/json", "idempotent-replayed": "true" }, body: text } });
    }
    if (req.method !== "POST" || url.pathname !== "/orders") return send(404, { error: "not found" });
    const raw = req.headers["idempotency-key"] ?? "";
    const key = /^"[^"\\]*"$/.test(raw) && !flaw("sf-string") ? raw.slice(1, -1) : raw;
    if (!/^[\x21-\x7e]{1,255}$/.test(key) || /["\\]/.test(key)) return send(400, { error: "malformed idempotency key" });
    const hash = createHash("sha256").update(body).digest("hex");
    const replay = () => {
      const found = keys.get(key);
      if (found.fenced) return send(410, { error: "idempotency key fenced" });
      if (!found.answer) {
        if (flaw("busy-502")) return send(502, { error: "bad gateway" });
        return send(409, { error: "in flight" }, flaw("no-retry-after") ? {} : { "retry-after": "1" });
      }
      if (!flaw("fingerprint") && found.hash !== hash) return send(422, { error: "idempotency key reused with another request" });
      if (flaw("replay-409")) return send(409, found.answer.text);
      return send(found.answer.status, found.answer.text, flaw("marker") ? {} : { "idempotent-replayed": "true" });
    };
    if (keys.has(key)) return replay();
    if (!flaw("lock")) keys.set(key, { hash, answer: null });
    // The work: a slow-ish endpoint (an await), after which the answer is stored with the key.
    await pause(flaw("fast") ? 0 : 200);
    effects.set(key, (effects.get(key) ?? 0) + 1);
    let parsed = null;
    try {
      parsed = JSON.parse(body);
    } catch {
      // A bad body is refused below.
    }
    const answer = parsed && typeof parsed === "object" && !Array.isArray(parsed)
      ? { status: 201, text: JSON.stringify({ id: `ord_${++orders}`, idempotencyKey: key }) }
      : { status: 400, text: JSON.stringify({ error: "invalid order" }) };
    if (flaw("replay-409") && answer.status >= 300) keys.delete(key);
    else keys.set(key, { hash, answer });
    send(answer.status, answer.text);
  }
  return new Promise((resolve) => {
    server.listen(0, "127.0.0.1", () => {
      const url = `http://127.0.0.1:${server.address().port}`;
      resolve({ url, effects, stop: () => new Promise((done) => { server.closeAllConnections(); server.close(done); }) });
    });
  });
}

/** The check against a mini server, with every option (key status and CORS included). */
async function checkMini(server) {
  return checkJson(["check", `${server.url}/orders`, "--body", ORDER, "--key-status-url", `${server.url}/keys/{key}`, "--origin", ORIGIN]);
}

test("usage errors and an endpoint that does not answer exit 2 with a message that names the problem", { timeout: TIMEOUT_MS }, async () => {
  const cases = [
    [[], /missing the command: check/],
    [["verify", "http://127.0.0.1:1/orders"], /unknown command verify/],
    [["check"], /missing <url>/],
    [["check", "ftp://127.0.0.1/orders"], /must be http: or https:/],
    [["check", "http://127.0.0.1:1/orders", "--body", "{not json"], /--body is not JSON/],
    [["check", "http://127.0.0.1:1/orders", "--body", "[1]"], /give --other-body too/],
    [["check", "http://127.0.0.1:1/orders", "--header", "no colon"], /--header wants "Name: value"/],
    [["check", "http://127.0.0.1:1/orders", "--header", "Idempotency-Key: k"], /sets Idempotency-Key itself/],
    [["check", "http://127.0.0.1:1/orders", "--key-status-url", "/keys/"], /must hold \{key\}/],
    [["check", "http://127.0.0.1:1/orders", "--origin", "https://page.example/app"], /--origin wants an origin/],
    [["check", "http://127.0.0.1:1/orders", "--retries", "3"], /unknown option --retries/],
  ];
  for (const [args, message] of cases) {
    const run = await check(args);
    assert.equal(run.status, 2, `${args.join(" ")}: exit 2\n${run.stderr}`);
    assert.match(run.stderr, message, args.join(" "));
    assert.doesNotMatch(run.stderr, /sending real requests/, `${args.join(" ")}: nothing sent`);
  }
  // A port nobody listens on: the check cannot run, and says so.
  const closed = await new Promise((resolve) => {
    const server = http.createServer().listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
  const unreachable = await check(["check", `http://127.0.0.1:${closed}/orders`]);
  assert.equal(unreachable.status, 2, unreachable.stderr);
  assert.match(unreachable.stderr, /cannot check .* got no answer \(fetch failed: .*ECONNREFUSED/s);
  const help = await check(["check", "--help"]);
  assert.equal(help.status, 0);
  assert.match(help.stdout, /usage: idempotent-fetch-client check <url>/);
});

test("the reference server passes every case (exit 0), and each key made one order; without its session the check cannot run (exit 2)", { timeout: TIMEOUT_MS }, async () => {
  const server = await startReferenceServer({ www: tmpDir, label: "check", args: ["--cors-origin", ORIGIN] });
  try {
    // Requests hold their key for 300 ms, so the concurrent case's duplicates find it in flight.
    await server.setFaults({ latencyMs: 300, latencyProbability: 1 });
    const account = "acct_check";
    const endpoint = `${server.url}/api/orders`;
    const refused = await check(["check", endpoint, "--body", ORDER]);
    assert.equal(refused.status, 2, refused.stderr);
    assert.match(refused.stderr, /cannot check .* answered 401 .*--header/s);

    const session = `Authorization: Bearer ${await server.session(account)}`;
    const { status, report, rows } = await checkJson(["check", endpoint, "--body", ORDER, "--header", session,
      "--key-status-url", "/api/idempotency-keys/{key}", "--origin", ORIGIN]);
    assertVerdicts(rows, {}, "reference server");
    assert.equal(status, 0);
    assert.equal(report.failed, false);
    assert.match(rows.get(3).seen, /^8 released together with one key: \d × 201, \d × 409 \(refused, no second effect\): one effect, the others refused/, "the concurrent requests met the key in flight");
    assert.equal(rows.get(3).warning, "", "the reference server sends Retry-After");
    const orders = await server.orders(account);
    // One order per key that was accepted: the probe, case 2's first request, case 3's bursts, case 5's
    // three forms, case 8's POST (case 7's fenced key made none).
    assert.equal(orders.length, 6 + bursts(rows), JSON.stringify(orders.map((order) => order.idempotencyKey)));
    assert.equal(new Set(orders.map((order) => order.idempotencyKey)).size, orders.length, "one order per key");
  } finally {
    await server.stop();
  }
});

test("examples/invite (the server library alone) fails no case: 1, 2, 3, 5, 6 and 7 pass, 4 and 8 say why they cannot (exit 0); one invitation per key", { timeout: TIMEOUT_MS }, async () => {
  const mail = await startService("mail-receiver", { label: "check-mail" });
  const app = await startService("invite-example", { label: "check-invite", args: ["--mail-url", mail.url] });
  try {
    const { status, rows } = await checkJson(["check", `${app.url}/api/invites`, "--body", JSON.stringify({ email: "check@example.com" }),
      "--key-status-url", "/api/idempotency-keys/{key}"]);
    assertVerdicts(rows, { 4: "SKIP", 8: "SKIP" }, "examples/invite");
    assert.equal(status, 0);
    assert.match(rows.get(4).seen, /a refused request: 400, then 400 unmarked/);
    const { invites } = await app.get("/api/invites");
    // One invitation per key: the probe, case 2's first request, case 3's bursts, case 5's three forms.
    assert.equal(invites.length, 5 + bursts(rows), JSON.stringify(invites));
  } finally {
    await app.stop();
    await mail.stop();
  }
});

test("a correct server written here passes every case: the check holds no reference-server detail", { timeout: TIMEOUT_MS }, async () => {
  const server = await startMiniServer();
  try {
    const { status, rows } = await checkMini(server);
    assertVerdicts(rows, {}, "correct mini server");
    assert.equal(status, 0);
    assert.ok([...server.effects.values()].every((n) => n === 1), "the work once per key");
  } finally {
    await server.stop();
  }
});

test("no in-flight lock (check, await, insert): case 3 fails naming the lock; every other case passes", { timeout: TIMEOUT_MS }, async () => {
  const server = await startMiniServer("lock");
  try {
    const { status, rows } = await checkMini(server);
    assertVerdicts(rows, { 3: "FAIL" }, "no lock");
    assert.equal(status, 1);
    const [, times] = /8 × 201 \(\d different answers\): the work was done (\d) times \(no in-flight lock\)/.exec(rows.get(3).seen) ?? [];
    assert.ok(Number(times) >= 2, rows.get(3).seen);
    assert.match(rows.get(3).fix, /Take the key before the work, atomically/);
    assert.equal(Math.max(...server.effects.values()), Number(times), "the server did one key's work as many times as the check says");
  } finally {
    await server.stop();
  }
});

test("no replay marker: case 1 fails naming Idempotent-Replayed (table output, exit 1); case 4 cannot tell a stored refusal and says so", { timeout: TIMEOUT_MS }, async () => {
  const server = await startMiniServer("marker");
  try {
    const { status, rows } = await checkMini(server);
    assertVerdicts(rows, { 1: "FAIL", 4: "SKIP" }, "no marker");
    assert.equal(status, 1);
    assert.match(rows.get(1).seen, /201 twice, the same body, but the second is not marked \(no Idempotent-Replayed: true\)/);
    assert.match(rows.get(4).seen, /400, then 400 unmarked: answered anew \(a refusal need not be stored\) or replayed without the marker/);

    const table = await check(["check", `${server.url}/orders`, "--body", ORDER]);
    assert.equal(table.status, 1, table.stderr);
    assert.match(table.stdout, /^ 1 {2}same key, same body: replayed +FAIL +201 twice/m);
    assert.match(table.stdout, /^ +fix: Mark every replayed answer with Idempotent-Replayed: true/m);
    assert.match(table.stdout, /^ 6 {2}key-status endpoint +SKIP +no --key-status-url given$/m);
    assert.match(table.stdout, /^3 passed, 1 failed, 4 skipped$/m);
  } finally {
    await server.stop();
  }
});

test("no fingerprint check: case 2 fails naming the fingerprint; every other case passes", { timeout: TIMEOUT_MS }, async () => {
  const server = await startMiniServer("fingerprint");
  try {
    const { status, rows } = await checkMini(server);
    assertVerdicts(rows, { 2: "FAIL" }, "no fingerprint");
    assert.equal(status, 1);
    assert.match(rows.get(2).seen, /another body under the same key got the first answer back \(201, marked replayed\): no fingerprint check/);
    assert.match(rows.get(2).fix, /answer 422 when the key comes with another request/);
  } finally {
    await server.stop();
  }
});

test("a server that refuses the sf-string key form, answers 404 for a key it does not know and hides its headers from a page: cases 5, 6 and 8 fail, each saying what", { timeout: TIMEOUT_MS }, async () => {
  const server = await startMiniServer("sf-string", "status-404", "hidden");
  try {
    const { status, rows } = await checkMini(server);
    assertVerdicts(rows, { 5: "FAIL", 6: "FAIL", 8: "FAIL" }, "key forms, key status, CORS");
    assert.equal(status, 1);
    assert.match(rows.get(5).seen, /^sf-string "UUID": refused, 400 .*; raw UUID 201, then replayed; 255 chars 201, then replayed$/);
    assert.match(rows.get(6).seen, /^a key never sent: GET .*\/keys\/[0-9a-f-]{36}: 404 /);
    assert.match(rows.get(8).seen, /the answers do not expose Idempotent-Replayed, Retry-After \(the page cannot read them\)/);
    assert.match(rows.get(8).fix, /Access-Control-Expose-Headers: Idempotent-Replayed, Retry-After/);
  } finally {
    await server.stop();
  }
});

test("a server without the settle request (POST on the key-status URL is 405): case 7 fails, naming the fence and what replace costs there; a fenced key's late request does nothing on a server with it", { timeout: TIMEOUT_MS }, async () => {
  const server = await startMiniServer("no-fence");
  try {
    const { status, rows } = await checkMini(server);
    assertVerdicts(rows, { 7: "FAIL" }, "no fence");
    assert.equal(status, 1);
    assert.match(rows.get(7).seen, /^no settle request: POST .*\/keys\/[0-9a-f-]{36}: 405 /);
    assert.match(rows.get(7).fix, /onMismatch: "replace"\) cannot rule out that a request with the old key still on its way makes a second order/);
  } finally {
    await server.stop();
  }
  const fenced = await startMiniServer();
  try {
    const { rows } = await checkMini(fenced);
    assert.match(rows.get(7).seen, /a key never sent: "fenced", then its request refused 410/);
    assert.equal([...fenced.effects.values()].reduce((a, b) => a + b, 0), fenced.effects.size, "the work once per key, and none for the fenced key");
  } finally {
    await fenced.stop();
  }
});

// Servers broken in each way the concurrent case must see through, each with a 0 ms handler: the
// requests are released together, and the case judges by what the server did.

test("no in-flight lock and a 0 ms handler is never PASS: released together, its duplicates do the work again (FAIL), and on a single worker, where they cannot overlap, case 3 is INCONCLUSIVE (exit 3) and says how to make it conclusive", { timeout: TIMEOUT_MS }, async () => {
  const fast = await startMiniServer("lock", "fast");
  try {
    const { status, rows } = await checkMini(fast);
    assert.ok(["FAIL", "INCONCLUSIVE"].includes(rows.get(3).verdict), `case 3: ${rows.get(3).verdict}: ${rows.get(3).seen}`);
    assert.equal(status, rows.get(3).verdict === "FAIL" ? 1 : 3);
    if (rows.get(3).verdict === "FAIL") {
      assert.match(rows.get(3).seen, /the work was done (\d) times \(no in-flight lock\)/);
      assert.ok(Math.max(...fast.effects.values()) >= 2, "the server did the work again");
    }
  } finally {
    await fast.stop();
  }
  const serial = await startMiniServer("lock", "fast", "serial");
  try {
    const { status, report, rows } = await checkMini(serial);
    assertVerdicts(rows, { 3: "INCONCLUSIVE" }, "no lock, one worker");
    assert.equal(status, 3);
    assert.equal(report.failed, false);
    assert.equal(report.inconclusive, true);
    assert.match(rows.get(3).seen, /^8 released together with one key: 8 × 201[,:] one effect/);
    assert.match(rows.get(3).seen, /\(burst 3 of 3: the earlier ones did not overlap\)$/, "a burst without overlap is sent again");
    assert.equal(Math.max(...serial.effects.values()), 1, "each burst's key did the work once");
    assert.match(rows.get(3).fix, /a slower handler on a test instance, or a delay header .* --header "X-Fault: latency=300"/);
    const table = await check(["check", `${serial.url}/orders`, "--body", ORDER]);
    assert.equal(table.status, 3, table.stderr);
    assert.match(table.stdout, /^ 3 {2}8 concurrent, one key: one effect +INCONCLUSIVE +8 released together/m);
    assert.match(table.stdout, /^ +to check it: Make the work slower than the requests' arrival/m);
    assert.match(table.stdout, /^\d passed, 0 failed, 1 inconclusive, \d skipped$/m);
  } finally {
    await serial.stop();
  }
});

test("a server that answers 502 while a key is in flight (0 ms handler): case 3 passes, naming the 502s as refusals with no second effect, and warns that they carry no Retry-After", { timeout: TIMEOUT_MS }, async () => {
  const server = await startMiniServer("busy-502", "fast");
  try {
    const { status, rows } = await checkMini(server);
    assertVerdicts(rows, {}, "502 in flight");
    assert.equal(status, 0);
    assert.match(rows.get(3).seen, /^8 released together with one key: \d × 201, \d × 502 \(refused, no second effect\): one effect, the others refused/);
    assert.match(rows.get(3).warning, /^\d refusals? \(502\) without Retry-After: the client retries them after its own backoff/);
    assert.ok([...server.effects.values()].every((n) => n === 1), "the work once per key");
  } finally {
    await server.stop();
  }
});

test("a server that replays with 409 and the first answer's body (0 ms handler) is recognised as replaying: cases 1, 3 and 5 pass and name the client's replayStatus: 409", { timeout: TIMEOUT_MS }, async () => {
  const server = await startMiniServer("replay-409", "fast");
  try {
    const { status, rows } = await checkMini(server);
    assertVerdicts(rows, { 4: "SKIP" }, "replays with 409");
    assert.equal(status, 0);
    assert.match(rows.get(1).seen, /^201, then 409 with the first answer's body byte for byte: a replay answered with 409$/);
    for (const id of [1, 3, 5]) assert.match(rows.get(id).warning, /give the client replayStatus: 409/, `case ${id}`);
    assert.match(rows.get(5).seen, /sf-string "UUID" 201, then replayed with 409/);
    assert.doesNotMatch(rows.get(3).seen, /in flight/);
  } finally {
    await server.stop();
  }
});

test("a correct server whose in-flight 409s carry no Retry-After (0 ms handler) passes every case, with a warning on case 3 (exit 0)", { timeout: TIMEOUT_MS }, async () => {
  const server = await startMiniServer("no-retry-after", "fast");
  try {
    const { status, rows } = await checkMini(server);
    assertVerdicts(rows, {}, "no Retry-After");
    assert.equal(status, 0);
    assert.match(rows.get(3).seen, /\d × 409 \(refused, no second effect\): one effect, the others refused/);
    assert.match(rows.get(3).warning, /^\d refusals? \(409\) without Retry-After/);
    const table = await check(["check", `${server.url}/orders`, "--body", ORDER]);
    assert.equal(table.status, 0, table.stderr);
    assert.match(table.stdout, /^ +warning: \d refusals? \(409\) without Retry-After/m);
  } finally {
    await server.stop();
  }
});
