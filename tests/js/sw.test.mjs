// idempotent-fetch-client/sw (pkg/sw.js) in Node: its options are checked before anything else, each bad
// one a typed INVALID_OPTIONS naming it, and it refuses to run outside a service worker (here: Node).
// What it does in a service worker is tests/js/background.test.mjs, in real browsers.
// Needs the package (cargo xtask build). Run: node --test tests/js/sw.test.mjs
import { test } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { pathToFileURL } from "node:url";

import { importPackage, pkgDir } from "../support/paths.mjs";

const { IdempotentClient } = await importPackage();
const { backgroundSync, BACKGROUND_CHANNEL, BACKGROUND_SYNC_TAG } = await import(pathToFileURL(path.join(pkgDir, "sw.js")).href);

const refused = (options, message) =>
  assert.throws(() => backgroundSync(options), (error) => error.name === "IdempotentFetchError" && error.code === "INVALID_OPTIONS" && message.test(error.message));

test("the shared names: the Background Sync tag and the BroadcastChannel", () => {
  assert.equal(BACKGROUND_SYNC_TAG, "idempotent-fetch");
  assert.equal(BACKGROUND_CHANNEL, "idempotent-fetch");
});

test("bad options are INVALID_OPTIONS naming the option", () => {
  const client = new IdempotentClient({ storage: { get: async () => undefined, put: async () => {}, delete: async () => {}, all: async () => [] } });
  refused(undefined, /options\.client/);
  refused({ client: {} }, /options\.client/);
  refused({ client, headers: "Bearer x" }, /options\.headers/);
  refused({ client, tag: "" }, /options\.tag/);
  // A client whose storage a page cannot share with the worker.
  refused({ client }, /storage "indexeddb".*"custom"/);
  refused({ client: new IdempotentClient({ storage: "memory" }) }, /storage "indexeddb".*"memory"/);
});

test("outside a service worker: INVALID_OPTIONS, no listener added", () => {
  const client = new IdempotentClient({ storage: "memory" });
  // A client that says "indexeddb" (Node has none: the check of the scope is what refuses).
  Object.defineProperty(client, "storage", { value: "indexeddb" });
  refused({ client }, /runs in a service worker/);
});
