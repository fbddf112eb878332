// examples/mcp-orders as a user gets it: the folder copied as it is in the repository, next to the
// packed package unpacked as pkg/ (the layout of a checkout after the build, which its `file:../../pkg`
// dependency names), `npm ci`, then started with `npm start --silent` by the MCP SDK's own client over
// stdio, as the example's README tells an agent to; driven against the reference server.
//
// What the tools tell the agent is asserted word for word where it decides the agent's next move:
// when no answer came back the order may have been placed and the same call is the way to learn it;
// a key reused with other arguments names that key and the earlier order.
//
// Needs: the package (pkg/, `node package/build.mjs`), the reference server (IF_SERVER_BIN or
// tests/support/reference-server.mjs builds it) and the npm registry (or its cache) for `npm ci`.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";

import { startInjectProxy } from "../support/inject-proxy.mjs";
import { packPackage } from "../support/packed.mjs";
import { pkgMissing, requirePrerequisites, root } from "../support/paths.mjs";
import { serverBinary, startReferenceServer } from "../support/reference-server.mjs";

const EXAMPLE = "examples/mcp-orders";
const TIMEOUT_MS = 180_000;
const log = (message) => console.log(`mcp: ${message}`);

let tmpDir;
let app; // the example's copy, installed
let server;
let sdk;

function run(command, args, cwd) {
  const started = Date.now();
  log(`${cwd}$ ${command} ${args.join(" ")}`);
  const result = spawnSync(command, args, { cwd, encoding: "utf8", maxBuffer: 64 << 20 });
  if (result.error) throw new Error(`${command}: ${result.error.message}`);
  if (result.status !== 0) throw new Error(`${command} ${args.join(" ")} failed (${result.status}) in ${cwd}\n${result.stdout}\n${result.stderr}`.trim());
  log(`  done in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  return result.stdout;
}

before(async () => {
  requirePrerequisites("the MCP example's tests", [pkgMissing()]);
  serverBinary(); // built now when missing, not inside a test's timeout
  tmpDir = mkdtempSync(path.join(os.tmpdir(), "if-mcp-"));
  const checkout = path.join(tmpDir, "checkout");
  // What `npm pack` ships (package.json "files"), where the example's dependency looks for it.
  const { tarball } = packPackage(tmpDir);
  mkdirSync(path.join(checkout, "pkg"), { recursive: true });
  run("tar", ["-xzf", tarball, "--strip-components=1", "-C", path.join(checkout, "pkg")], tmpDir);
  // The committed files only: a local node_modules or state folder is not what a user copies.
  app = path.join(checkout, EXAMPLE);
  cpSync(path.join(root, EXAMPLE), app, { recursive: true, filter: (source) => !/[/\\](node_modules|state)$/.test(source) });
  run("npm", ["ci", "--no-audit", "--no-fund"], app);
  const installed = path.join(app, "node_modules/idempotent-fetch-client");
  assert.ok(existsSync(path.join(installed, "package.json")), "npm ci installed idempotent-fetch-client");
  assert.deepEqual(readFileSync(path.join(installed, "agent.js")), readFileSync(path.join(checkout, "pkg/agent.js")), "the packed package's files");
  const load = (file) => import(pathToFileURL(path.join(app, "node_modules/@modelcontextprotocol/sdk/dist/esm", file)).href);
  sdk = { ...(await load("client/index.js")), ...(await load("client/stdio.js")) };
  server = await startReferenceServer({ www: path.join(root, "www"), label: "mcp" });
});

after(async () => {
  await server?.stop();
  if (tmpDir) rmSync(tmpDir, { recursive: true, force: true });
});

const ordersOf = async (account) => (await server.api("/api/orders", { account })).orders;

/**
 * The example started as the README's agent configuration does (`npm start --silent` in its folder),
 * connected with the SDK's client. Anything on stdout that is not a protocol message (npm's banner,
 * a stray log line) reaches the client's `onerror`: collected in `problems`, asserted empty on close.
 */
async function connect(account, state, { api = server.url, ...extra } = {}) {
  const env = { ...process.env, IF_API: api, IF_TOKEN: await server.session(account), IF_STATE_DIR: state, IF_RUN_ID: "run_7f2c", ...extra };
  const transport = new sdk.StdioClientTransport({ command: "npm", args: ["start", "--silent"], cwd: app, env, stderr: "pipe" });
  let stderr = "";
  transport.stderr?.on("data", (chunk) => { stderr += chunk; });
  const client = new sdk.Client({ name: "test-agent", version: "1.0.0" });
  const problems = [];
  client.onerror = (error) => problems.push(String(error?.message ?? error));
  await client.connect(transport);
  return {
    call: async (name, args) => (await client.callTool({ name, arguments: args })).structuredContent,
    close: async () => {
      await client.close();
      assert.deepEqual(problems, [], `the MCP client's errors (stderr: ${stderr})`);
    },
  };
}

test("MCP example: every answer lost, the result says the order may have been placed and to call again the same way; that call returns the order; the key reused with other arguments names the key and the earlier order", { timeout: TIMEOUT_MS }, async () => {
  const account = "acct_mcp_lost";
  const state = mkdtempSync(path.join(tmpDir, "state-"));
  const items = [{ sku: "mug", qty: 2 }];
  const key = "agent_run7f2c_step3_charge";
  // The server does the work and answers; the proxy resets the connection instead of passing the
  // answer on, for the orders and for the key-status question alike.
  let lose = true;
  const proxy = await startInjectProxy({ target: server.url, loseAnswer: () => lose });
  try {
    const agent = await connect(account, state, { api: proxy.url, IF_MAX_ATTEMPTS: "2" });
    const lost = await agent.call("place_order", { items, idempotencyKey: key });
    log(`lost: ${JSON.stringify(lost)}`);
    assert.deepEqual([lost.ok, lost.code, lost.key, lost.orderPlaced], [false, "RETRIES_EXHAUSTED", key, "maybe"], JSON.stringify(lost));
    assert.equal(
      lost.message,
      `No definite answer after 2 attempts (every answer was lost): the order may have been placed. Call place_order again with the same arguments and idempotencyKey "${key}" to get its result (it never places a second order), or order_status with that key; do not change the arguments or the key, which would place a second order.`,
    );
    let orders = await ordersOf(account);
    assert.equal(orders.length, 1, "the server made the order whose answers were lost");

    // The agent does what the message says: the same call, answered this time.
    lose = false;
    const again = await agent.call("place_order", { items, idempotencyKey: key });
    assert.deepEqual([again.ok, again.replayed, again.orderId, again.orderPlaced], [true, true, orders[0].id, "yes"], JSON.stringify(again));
    assert.equal(again.message, `Order ${orders[0].id} was already placed by an earlier call with idempotencyKey "${key}"; this is its result. No second order was placed.`);
    const status = await agent.call("order_status", { idempotencyKey: key });
    assert.deepEqual([status.status, status.orderId, status.message], ["done", orders[0].id, `Order ${orders[0].id} was placed with idempotencyKey "${key}".`]);

    // The key reused for another order: nothing is sent, and the advice names the key and its order.
    const reused = await agent.call("place_order", { items: [{ sku: "kettle", qty: 1 }], idempotencyKey: key });
    assert.deepEqual([reused.ok, reused.code, reused.key, reused.orderPlaced], [false, "INTENT_MISMATCH", key, "not by this call"], JSON.stringify(reused));
    assert.equal(
      reused.message,
      `idempotencyKey "${key}" was already used by an earlier place_order call with other arguments (order ${orders[0].id}: 2 x mug); no order was placed for 1 x kettle. To get the earlier call's result, call order_status with that key. To place this order as a new one, call place_order again without idempotencyKey (or with a new one).`,
    );
    await agent.close();
    orders = await ordersOf(account);
    assert.deepEqual(orders.map((order) => order.idempotencyKey), [key], "one order, with the agent's key");
  } finally {
    await proxy.close();
  }
});

test("MCP example: the committed answer dropped is recovered within the call; a call without a key gives up while the server fails, and after a restart the re-planned call (arguments in another order) gets the same key: one order per intent", { timeout: TIMEOUT_MS }, async () => {
  const account = "acct_mcp";
  const state = mkdtempSync(path.join(tmpDir, "state-"));
  try {
    const items = [{ sku: "mug", qty: 2 }];
    const key = "agent_run7f2c_step4_charge";
    // The first answer is lost after the commit: the client's retry gets the replay.
    await server.setFaults({ dropAfterCommit: 1 });
    let agent = await connect(account, state);
    const first = await agent.call("place_order", { items, idempotencyKey: key });
    assert.deepEqual([first.ok, first.replayed, first.key], [true, true, key], JSON.stringify(first));
    await server.setFaults({});
    const retried = await agent.call("place_order", { items, idempotencyKey: key });
    assert.deepEqual([retried.ok, retried.replayed, retried.orderId], [true, true, first.orderId], JSON.stringify(retried));
    await agent.close();

    // Without a key: derived from the run and the canonical arguments.
    await server.setFaults({ failBeforeWork: 1 });
    agent = await connect(account, state, { IF_MAX_ATTEMPTS: "1" });
    const gaveUp = await agent.call("place_order", { items: [{ qty: 1, sku: "mug" }] });
    assert.deepEqual([gaveUp.code, gaveUp.orderPlaced], ["RETRIES_EXHAUSTED", "maybe"], JSON.stringify(gaveUp));
    assert.match(gaveUp.message, new RegExp(`^No definite answer after \\d+ attempts? \\(the server last answered HTTP 503\\): the order may have been placed\\. Call place_order again with the same arguments and idempotencyKey "${gaveUp.key}"`));
    await agent.close();
    await server.setFaults({});
    agent = await connect(account, state);
    const replanned = await agent.call("place_order", { items: [{ sku: "mug", qty: 1 }] });
    assert.deepEqual([replanned.ok, replanned.replayed, replanned.key], [true, false, gaveUp.key], JSON.stringify(replanned));
    await agent.close();
    const orders = await ordersOf(account);
    assert.deepEqual(orders.map((order) => order.idempotencyKey).sort(), [key, gaveUp.key].sort(), "one order per intent");
    log(orders.map((order) => `${order.id} (${order.idempotencyKey})`).join(", "));
  } finally {
    await server.setFaults({});
  }
});

test("MCP example: a refused order says no order was placed and why; order_status of a key never used here says so, never \"unknown\"", { timeout: TIMEOUT_MS }, async () => {
  const account = "acct_mcp_refused";
  const agent = await connect(account, mkdtempSync(path.join(tmpDir, "state-")));
  const refused = await agent.call("place_order", { items: [{ sku: "teapot", qty: 1 }] });
  assert.deepEqual([refused.ok, refused.status, refused.orderPlaced], [false, 400, "no"], JSON.stringify(refused));
  assert.match(refused.message, /^The orders server refused the order \(HTTP 400: Unknown sku "teapot"; see GET \/api\/products\.\); no order was placed\. Change the arguments/);
  const status = await agent.call("order_status", { idempotencyKey: "agent_never_used_here_1" });
  assert.equal(status.status, "not_found", JSON.stringify(status));
  assert.doesNotMatch(status.message, /unknown/i);
  await agent.close();
  assert.deepEqual(await ordersOf(account), []);
});
