// Every export of the wasm module through the glue that ships: src/js/abi.ts bundled as the package
// bundles it for Node (package/build.mjs `wasmSourcePlugin`, with the names the build gave
// pkg/idempotent_fetch_bg.wasm), over pkg's .wasm. Strings cross as UTF-8 through the scratch buffer
// (non-ASCII, one after another, absent ones, large enough to grow the memory), number arrays as
// f64, handles as addresses (consumed, freed, freed twice), booleans as 0/1, refusals through
// lastError(), the CSPRNG import caught. The rules themselves are the native suites' (tests/core_*).
// Run: node --test tests/js/abi.test.mjs (needs pkg/: node package/build.mjs).
import { test } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { existsSync } from "node:fs";
import path from "node:path";

import { root } from "../support/paths.mjs";
import { PKG_DIR, WASM_FILE, WASM_NAMES_FILE, readWasmNames, wasmSourcePlugin } from "../../package/build.mjs";

if (!existsSync(path.join(PKG_DIR, WASM_FILE)) || !existsSync(WASM_NAMES_FILE)) {
  throw new Error(`${PKG_DIR} or ${WASM_NAMES_FILE} is missing: build the package first (node package/build.mjs)`);
}
const esbuild = createRequire(path.join(root, "tools/package.json"))("esbuild");
const { outputFiles } = await esbuild.build({
  stdin: { contents: 'export * from "./abi.ts"; export * from "./generated/contract.ts";', resolveDir: path.join(root, "src/js"), loader: "ts" },
  bundle: true, format: "cjs", platform: "node", target: "node18", write: false, logLevel: "warning",
  plugins: [wasmSourcePlugin("node", readWasmNames())],
});
// As node.cjs runs it: CommonJS next to the .wasm, which it instantiates when loaded.
const module = { exports: {} };
new Function("module", "exports", "require", "__dirname", outputFiles[0].text)(module, module.exports, createRequire(import.meta.url), PKG_DIR);
const G = module.exports;
const { Engine, Machine, lastError } = G;

const NOW = 1_700_000_000_000;
const FP = "a1".repeat(32);
const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** The shipped defaults (the contract's OPTIONS) with these edits. */
const options = (edits = {}) => Float64Array.from(G.OPTIONS, (spec, i) => edits[i] ?? spec[3]);
const engine = (edits) => Engine.create(options(edits)) ?? assert.fail(`Engine.create refused: ${lastError()}`);
const refusal = (code, detail) => code * 256 + detail;

/** A stored record's numbers by FIELD_* slot, as the driver hands them to `load`. */
function numbers(edits = {}) {
  const n = new Array(G.RECORD_SLOTS).fill(0);
  n[G.FIELD_VERSION] = G.RECORD_VERSION;
  n[G.FIELD_CREATED_AT] = NOW;
  n[G.FIELD_UPDATED_AT] = NOW;
  n[G.FIELD_STATE] = G.STATE_PENDING;
  n[G.FIELD_LAST_STATUS] = G.NO_STATUS;
  for (const [slot, value] of Object.entries(edits)) n[slot] = value;
  return n;
}

test("Engine.create takes the options as f64 and refuses one out of range with lastError", () => {
  const e = engine({ [G.OPT_RETRY_BUDGET]: 7 });
  assert.ok(e instanceof Engine);
  assert.equal(e.budget(), 7, "the 9th number arrived in its slot");
  for (const [index, value] of [[G.OPT_MAX_ATTEMPTS, 0], [G.OPT_JITTER, 1.5], [G.OPT_RETRY_BUDGET, Number.NaN], [G.OPT_REPLAY_STATUS, -1]]) {
    assert.equal(Engine.create(options({ [index]: value })), undefined, `option ${index} = ${value}`);
    assert.equal(lastError(), refusal(G.E_INVALID_OPTIONS, index));
  }
  assert.equal(Engine.create(options().slice(0, 3)), undefined, "too few numbers");
  assert.equal(lastError(), refusal(G.E_INVALID_OPTIONS, 3));
  e.free();
});

test("begin: four strings in order, a key from the CSPRNG import, a brought key back out, the header form", () => {
  const e = engine();
  const m = e.begin("checkout:cart-42", FP, FP, NOW, false);
  assert.ok(m instanceof Machine);
  assert.match(m.key(false), UUID_V4);
  assert.equal(m.key(true), m.key(false));
  assert.notEqual(e.begin("other", FP, FP, NOW, false).key(false), m.key(false), "two draws of the CSPRNG");
  assert.equal(m.get(G.F_RESUMED), G.RESUMED_NEW);
  assert.equal(m.get(G.F_DIRTY), 1);
  m.markSaved();
  assert.equal(m.get(G.F_DIRTY), 0, "markSaved reached the machine");
  assert.equal(m.get(9999), Number.NaN);

  const brought = "Order-42_~.".padEnd(255, "x");
  const b = e.begin("ü🙂 cart", FP, FP, NOW, false, brought);
  assert.equal(b?.key(false), brought, "255 bytes out through the scratch buffer");
  assert.equal(b.get(G.F_BROUGHT), 1);
  const sf = engine({ [G.OPT_HEADER_FORM]: G.HEADER_SF_STRING }).begin("x", FP, FP, NOW, false, brought);
  assert.equal(sf.key(true), `"${brought}"`, "`header` true reached the machine");

  // Each string refused in its own position: the lengths split the buffer where the glue wrote them.
  assert.equal(e.begin("", FP, FP, NOW, false), undefined);
  assert.equal(lastError(), refusal(G.E_INVALID_REQUEST, G.REQUEST_INTENT_ID));
  assert.equal(e.begin("x", "zz", FP, NOW, false), undefined);
  assert.equal(lastError(), refusal(G.E_INVALID_REQUEST, G.REQUEST_FINGERPRINT));
  assert.equal(e.begin("x", FP, FP, NOW, false, "short"), undefined);
  assert.equal(lastError(), refusal(G.E_INVALID_REQUEST, G.REQUEST_KEY));
  assert.equal(e.begin("a\u0085b", FP, FP, NOW, false), undefined, "U+0085 arrives as its UTF-8 (0xC2 0x85), a control");
  assert.equal(lastError(), refusal(G.E_INVALID_REQUEST, G.REQUEST_INTENT_ID));
  assert.equal(e.begin("a\u0100b", FP, FP, NOW, false)?.get(G.F_RESUMED), G.RESUMED_NEW, "U+0100 (0xC4 0x80) is no control");
});

test("load: the record's f64 numbers and four strings; begin consumes the candidates it resumes from", () => {
  const e = engine();
  const id = "ü🙂:checkout \ud800 lone surrogate";
  const key = "0b5d8a1e-3f4c-4e2a-9b7d-6c1f2e3a4b5c";
  const stored = e.load(id, id, key, FP, numbers({ [G.FIELD_ATTEMPTS]: 3, [G.FIELD_LAST_STATUS]: 503 }));
  assert.ok(stored instanceof Machine, `load refused: ${lastError()}`);
  assert.equal(stored.key(false), key);
  assert.equal(stored.get(G.F_TOTAL_ATTEMPTS), 3);
  assert.equal(stored.get(G.F_LAST_STATUS), 503);
  assert.equal(stored.get(G.F_CREATED_AT), NOW, "an f64 past 2^32 arrived whole");
  assert.equal(stored.get(G.F_RESUMED), G.RESUMED_STORED);
  assert.equal(e.load(id, `${id}!`, key, FP, numbers()), undefined, "the id differs from the intent id by one byte");
  assert.equal(lastError(), refusal(G.E_STORAGE, G.FIELD_ID));
  assert.equal(e.load(id, id, "not-a-key", FP, numbers()), undefined);
  assert.equal(lastError(), refusal(G.E_STORAGE, G.FIELD_KEY));
  assert.equal(e.load(id, id, key, FP, numbers({ [G.FIELD_STATE]: -1 })), undefined);
  assert.equal(lastError(), refusal(G.E_STORAGE, G.FIELD_STATE));
  assert.equal(e.load(id, id, key, FP, numbers().slice(0, 4)), undefined, "too few numbers");
  assert.equal(lastError(), refusal(G.E_STORAGE, G.FIELD_VERSION));

  const resumed = e.begin(id, FP, FP, NOW + 1, false, undefined, stored);
  assert.equal(resumed?.key(false), key, "resumed from the stored record: the intent ids matched byte for byte");
  assert.equal(resumed.get(G.F_RESUMED), G.RESUMED_STORED);
  assert.equal(stored.get(G.F_STATE), Number.NaN, "the candidate was consumed: its object is empty");
  stored.free(); // freeing an emptied object frees nothing

  const claimed = e.load(id, id, key, FP, numbers());
  const mine = e.begin(id, FP, FP, NOW, false);
  const fromClaim = e.begin(id, FP, FP, NOW + 2, false, null, null, claimed);
  assert.equal(fromClaim?.get(G.F_RESUMED), G.RESUMED_CLAIMED, "the 8th argument is the claim");
  assert.equal(claimed.get(G.F_STATE), Number.NaN, "the claim was consumed");
  const other = e.load(id, id, mine.key(false), FP, numbers());
  assert.equal(e.begin(id, "b2".repeat(32), "b2".repeat(32), NOW, false, undefined, other), undefined);
  assert.equal(lastError(), refusal(G.E_INTENT_MISMATCH, G.MISMATCH_STORED));
});

test("the send loop: on, onResponse with its three optional strings, onKeyStatus, sweep", () => {
  const e = engine({ [G.OPT_JITTER]: G.JITTERS.indexOf("none") });
  const m = e.begin("pay", FP, FP, NOW, false);
  assert.equal(m.on(G.EV_START, NOW, true), G.SEND);
  assert.equal(m.get(G.F_ATTEMPT), 1);
  assert.equal(m.onResponse(NOW + 10, 503, "7", null, undefined, G.OVERRIDE_NONE), G.WAIT);
  assert.equal(m.get(G.F_DELAY_MS), 7000, "Retry-After arrived");
  assert.equal(m.on(G.EV_WAKE, NOW + 7010, false), G.WAIT_ONLINE, "`online` false reached the machine");
  assert.equal(m.on(G.EV_ONLINE, NOW + 7020, true), G.SEND);
  assert.equal(m.onResponse(NOW + 7030, 503, null, "false", null, G.OVERRIDE_NONE), G.DONE, "Stripe-Should-Retry arrived");
  assert.equal(m.get(G.F_STATUS), 503);

  const r = e.begin("replayed", FP, FP, NOW, false);
  r.on(G.EV_START, NOW, true);
  assert.equal(r.onResponse(NOW + 1, 500, "x".repeat(300_000), undefined, " True ", G.OVERRIDE_RETRY), G.DONE, "the replay header, after a string that grew the memory");
  assert.equal(r.get(G.F_REPLAYED), 1);
  assert.match(r.key(true), UUID_V4, "the key read through a view of the grown memory");

  const asking = engine({ [G.OPT_JITTER]: G.JITTERS.indexOf("none"), [G.OPT_RECONCILE]: 1, [G.OPT_MAX_ATTEMPTS]: 1 });
  const s = asking.begin("ask", FP, FP, NOW, false);
  assert.equal(s.on(G.EV_START, NOW, true), G.SEND);
  assert.equal(s.on(G.EV_NETWORK_ERROR, NOW + 10, true), G.RECONCILE, "exhausted after an attempt that may have arrived");
  assert.equal(s.onKeyStatus(NOW + 20, G.KEY_IN_FLIGHT, 0, "3"), G.WAIT);
  assert.equal(s.get(G.F_DELAY_MS), 3000, "onKeyStatus's Retry-After arrived");
  assert.equal(s.on(G.EV_WAKE, NOW + 3020, true), G.SEND);
  assert.equal(s.onResponse(NOW + 3030, 201, undefined, undefined, undefined, G.OVERRIDE_NONE), G.DONE);
  const t = asking.begin("ask-again", FP, FP, NOW, false);
  assert.equal(t.on(G.EV_ASK, NOW, true), G.RECONCILE);
  assert.equal(t.onKeyStatus(NOW + 10, G.KEY_DONE, 409), G.DONE, "onKeyStatus without its string");
  assert.equal(t.get(G.F_STATUS), 409);

  assert.equal(e.sweep(m, NOW + 1), G.SWEEP_KEEP);
  assert.equal(e.sweep(m, NOW + 86_400_000 * 2), G.SWEEP_REMOVE, "the record past keyTtlMs");
});

test("a freed handle is refused, never a trap; the module keeps working", () => {
  const e = engine();
  const m = e.begin("x", FP, FP, NOW, false);
  m.free();
  m.free();
  assert.equal(m.get(G.F_STATE), Number.NaN);
  assert.equal(m.key(false), "");
  assert.equal(m.on(G.EV_START, NOW, true), 0, "no action: the driver's unknown-action path");
  assert.equal(m.onResponse(NOW, 200, "1", "1", "1", 0), 0);
  assert.equal(m.onKeyStatus(NOW, G.KEY_DONE, 200, "1"), 0);
  m.markSaved();
  assert.equal(e.sweep(m, NOW), G.SWEEP_KEEP);
  e.free();
  assert.equal(e.budget(), 0);
  assert.equal(e.begin("x", FP, FP, NOW, false), undefined);
  assert.equal(lastError(), refusal(G.E_INTERNAL, 0));
  assert.equal(e.load("x", "x", "k", FP, numbers()), undefined);
  assert.ok(engine().begin("x", FP, FP, NOW, false) instanceof Machine, "a new engine works");
});

test("the CSPRNG import catches a throwing crypto.getRandomValues: begin is refused STORAGE CSPRNG", (t) => {
  const e = engine();
  t.mock.method(globalThis.crypto, "getRandomValues", () => {
    throw new Error("no Web Crypto");
  });
  assert.equal(e.begin("x", FP, FP, NOW, false), undefined);
  assert.equal(lastError(), refusal(G.E_STORAGE, G.FIELD_CSPRNG));
  t.mock.restoreAll();
  assert.match(e.begin("x", FP, FP, NOW, false).key(false), UUID_V4);
});
