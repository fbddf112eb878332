// The stored record's encoder and decoder against the contract table (src/contract.rs, generated into
// src/js/generated/contract.ts): every field of RECORD_FIELDS is written from the machine field the
// table names for it (RECORD_READS) and handed back to Engine.load at its slot, whatever fields the
// table holds. A machine and an engine that record what they are asked stand in for the wasm: this
// pins the driver's half (the wasm suites pin load and get). Run: node --test tests/js/record.test.mjs
import { test } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import path from "node:path";

import { root } from "../support/paths.mjs";
import { DEFINES } from "../../package/build.mjs";

const esbuild = createRequire(path.join(root, "tools/package.json"))("esbuild");
const { outputFiles } = await esbuild.build({
  define: DEFINES.development, // src/js/mode.ts
  stdin: {
    contents: 'export { encodeRecord, decodeRecord } from "./record.ts"; export * from "./generated/contract.ts";',
    resolveDir: path.join(root, "src/js"),
    loader: "ts",
  },
  bundle: true, format: "esm", write: false, logLevel: "warning",
});
const C = await import(`data:text/javascript;base64,${Buffer.from(outputFiles[0].text).toString("base64")}`);
const { encodeRecord, decodeRecord, RECORD_FIELDS, RECORD_KINDS, RECORD_READS, RECORD_SLOTS, FIELD_VERSION, NO_STATUS, STATES } = C;

const ids = { intentId: "checkout:cart-42", key: "0b5d8a1e-3f4c-4e2a-9b7d-6c1f2e3a4b5c", fingerprint: "ab".repeat(32) };

/** A machine whose record fields all hold a value (distinct per field), or none (`unset`). */
function machine(unset = false) {
  const values = new Map();
  RECORD_READS.forEach((read, i) => {
    if (read < 0) return;
    const kind = RECORD_KINDS[i];
    values.set(read, kind === "string" ? STATES.indexOf("failed") : kind.startsWith("boolean") ? (unset ? 0 : 1) : kind === "number?" && unset ? 0 : 100 + i);
  });
  return { values, get: (field) => values.get(field) ?? Number.NaN };
}

/** An engine whose load keeps what it was handed. */
function engine() {
  const calls = [];
  return { calls, load: (...args) => (calls.push(args), { loaded: true }) };
}

test("every field of the table is written, in the table's order, from the field the table names", () => {
  const m = machine();
  const stored = JSON.parse(encodeRecord(m, ids, undefined));
  assert.deepEqual(Object.keys(stored), [...RECORD_FIELDS], "every field, in order, nothing else");
  RECORD_FIELDS.forEach((name, i) => {
    const read = RECORD_READS[i];
    if (read < 0) return;
    const n = m.values.get(read);
    const kind = RECORD_KINDS[i];
    const expected = kind === "string" ? STATES[n] : kind.startsWith("boolean") ? n === 1 : n;
    assert.equal(stored[name], expected, name);
  });
  assert.deepEqual([stored.v, stored.id, stored.key, stored.fingerprint], [C.RECORD_VERSION, ids.intentId, ids.key, ids.fingerprint]);
  assert.equal(JSON.parse(encodeRecord(m, { ...ids, plain: true }, undefined)).v, 1, "a version-1 record keeps its version");
});

test("decoding hands every written field back to Engine.load at its FIELD_* slot (the state as its index)", () => {
  const m = machine();
  const e = engine();
  const text = encodeRecord(m, ids, undefined);
  decodeRecord(e, ids.intentId, text);
  const [intentId, id, key, fingerprint, numbers] = e.calls[0];
  assert.deepEqual([intentId, id, key, fingerprint], [ids.intentId, ids.intentId, ids.key, ids.fingerprint]);
  assert.equal(numbers.length, RECORD_SLOTS);
  RECORD_FIELDS.forEach((name, i) => {
    const read = RECORD_READS[i];
    if (read < 0) return;
    assert.equal(numbers[FIELD_VERSION + i], m.values.get(read), name);
  });
  // A state name no build writes reaches the machine as -1, which it refuses.
  decodeRecord(e, ids.intentId, JSON.stringify({ ...JSON.parse(text), state: "done" }));
  assert.equal(e.calls[1][4][C.FIELD_STATE], -1);
});

test("an optional field is left out while it holds no value, and read back as none", () => {
  const m = machine(true);
  const stored = JSON.parse(encodeRecord(m, ids, undefined));
  const optional = RECORD_FIELDS.filter((_, i) => RECORD_KINDS[i].endsWith("?"));
  assert.ok(optional.length > 0);
  assert.deepEqual(Object.keys(stored), RECORD_FIELDS.filter((name) => !optional.includes(name)));
  const e = engine();
  decodeRecord(e, ids.intentId, JSON.stringify(stored));
  const numbers = e.calls[0][4];
  RECORD_FIELDS.forEach((name, i) => {
    const kind = RECORD_KINDS[i];
    if (kind.endsWith("?")) assert.equal(numbers[FIELD_VERSION + i], kind === "number?" ? NO_STATUS : 0, name);
  });
});

test("the persisted request follows the table's fields; an unknown field is refused", () => {
  const request = { method: "POST", url: "https://shop.example/orders", headers: [["content-type", "application/json"]], body: [123, 125] };
  const text = encodeRecord(machine(), ids, request);
  assert.deepEqual(Object.keys(JSON.parse(text)), [...RECORD_FIELDS, "request"]);
  assert.deepEqual(decodeRecord(engine(), ids.intentId, text).request, request);
  assert.throws(
    () => decodeRecord(engine(), ids.intentId, JSON.stringify({ ...JSON.parse(text), extra: 1 })),
    (error) => error.code === "STORAGE" && /unknown field extra/.test(error.message),
  );
});
