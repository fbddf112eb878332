// The development and production builds of the core (src/js/mode.ts, package/README.md): the same
// errors, with the same `code` and fields, from both; the development build's messages and warnings
// in full, the production build's a code and the docs page. Each build is the file package.json's
// `exports["."].import` names for the `development` condition and by default, loaded in Node (its
// .wasm read from disk) against a server on 127.0.0.1.
//
// Needs: the package (node package/build.mjs).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import path from "node:path";
import { pathToFileURL } from "node:url";

import { pkgDir, requirePrerequisites, pkgMissing } from "../support/paths.mjs";

requirePrerequisites("the builds test", [pkgMissing()]);

const manifest = JSON.parse(readFileSync(path.join(pkgDir, "package.json"), "utf8"));
const BUILDS = {
  development: manifest.exports["."].import.development,
  production: manifest.exports["."].import.default,
};
/** What the production build says instead of a message: the code and the README's error table. */
const DOCS = `${JSON.parse(readFileSync(path.join(pkgDir, "package.json"), "utf8")).repository.url.replace(/^git\+|\.git$/g, "")}#errors`;

// The browser entry fetches its .wasm next to itself (`new URL(..., import.meta.url)`); Node's fetch
// cannot read file: URLs, so those are served from disk here.
const realFetch = globalThis.fetch;
globalThis.fetch = (input, init) =>
  input instanceof URL && input.protocol === "file:"
    ? Promise.resolve(new Response(readFileSync(input), { headers: { "content-type": "application/wasm" } }))
    : realFetch(input, init);

let server;
let base;
const libs = {};
before(async () => {
  // /busy answers 503 (retried), /used 422 (this key was used with another request), /hang never.
  server = createServer((request, response) => {
    request.resume();
    if (request.url === "/hang") return;
    response.writeHead(request.url === "/used" ? 422 : 503, { "content-type": "text/plain" }).end("no");
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${server.address().port}`;
  for (const [name, file] of Object.entries(BUILDS)) {
    libs[name] = await import(pathToFileURL(path.join(pkgDir, file)).href);
    await libs[name].ready;
  }
});
after(() => {
  server?.closeAllConnections();
  server?.close();
});

const post = (url, body = "{}") => ({ url, method: "POST", headers: { "content-type": "application/json" }, body });
const quick = { storage: "memory", retry: { maxAttempts: 2, baseDelayMs: 1, maxDelayMs: 2 } };

/** Each case: what it does with one build's package, and what the development build's message says. */
const CASES = [
  ["an option of the wrong type", ({ IdempotentClient }) => new IdempotentClient({ retry: { maxAttempts: "8" } }), /retry\.maxAttempts must be a number, got string/],
  ["an unknown option", ({ IdempotentClient }) => new IdempotentClient({ retries: 3 }), /unknown field retries \(expected one of: /],
  ["an empty intent id", ({ IdempotentClient }) => new IdempotentClient(quick).begin("", post(`${base}/busy`)), /the intent id must be a string of 1 to 256 characters/],
  ["a GET with a body", ({ IdempotentClient }) => new IdempotentClient(quick).begin("get", { url: `${base}/busy`, method: "GET", body: "x" }), /a GET request cannot have a body/],
  ["a body over maxBodyBytes", ({ IdempotentClient }) => new IdempotentClient({ ...quick, maxBodyBytes: 4 }).begin("big", post(`${base}/busy`, "12345")), /larger than maxBodyBytes \(4 bytes\)/],
  [
    "an intent begun again with another request",
    async ({ IdempotentClient }) => {
      const client = new IdempotentClient(quick);
      await client.begin("pay", post(`${base}/busy`, '{"a":1}'));
      await client.begin("pay", post(`${base}/busy`, '{"a":2}'));
    },
    /intent "pay" was begun with a different request \(key [^)]+\); discard it or begin with \{ replace: true \}/,
  ],
  ["a resume of an intent never begun", ({ IdempotentClient }) => new IdempotentClient(quick).resume("nothing"), /intent "nothing" is not stored \(discarded\?\); begin it again/],
  [
    "a send the server keeps answering 503",
    async ({ IdempotentClient }) => (await new IdempotentClient(quick).begin("busy", post(`${base}/busy`))).send(),
    /no definite answer after retry\.maxAttempts attempts; the key is kept, send again to resume/,
  ],
  ["a key the server says was used", async ({ IdempotentClient }) => (await new IdempotentClient(quick).begin("used", post(`${base}/used`))).send(), /the server answered 422: this key was already used/],
  [
    "a send aborted by the caller",
    async ({ IdempotentClient }) => {
      const op = await new IdempotentClient(quick).begin("hang", post(`${base}/hang`));
      const abort = new AbortController();
      setTimeout(() => abort.abort(), 50);
      await op.send({ signal: abort.signal });
    },
    /aborted by the caller; the key is kept/,
  ],
];

/** The error `run` throws or rejects with. */
async function errorOf(run) {
  try {
    await run();
  } catch (error) {
    return error;
  }
  assert.fail("no error");
}

/** An error as data, without its message; a key (random per build) as its shape. */
const fields = (error) => ({
  name: error.name,
  code: error.code,
  key: typeof error.key === "string" ? "a key" : error.key,
  attempts: error.attempts,
  lastStatus: error.lastStatus,
  reason: error.reason,
  isError: error instanceof Error,
});

for (const [what, run, full] of CASES) {
  test(`${what}: the same error from both builds, its message in full in development only`, async () => {
    const development = await errorOf(() => run(libs.development));
    const production = await errorOf(() => run(libs.production));
    assert.ok(libs.development.isIdempotentFetchError(development), `development threw ${development}`);
    assert.deepEqual(fields(production), fields(development));
    assert.ok(production instanceof libs.production.IdempotentFetchError);
    assert.match(development.message, full);
    assert.equal(production.message, `${production.code} (${DOCS}; the development build of idempotent-fetch-client says more)`);
  });
}

test("a storage fallback warns in full in development, with its event name and docs page in production; its reason names what failed in both", async () => {
  const warned = {};
  const reasons = {};
  const warn = console.warn;
  try {
    for (const name of Object.keys(BUILDS)) {
      console.warn = (...args) => (warned[name] = args.join(" "));
      // Node has no localStorage: asked for it, the client falls back to memory and says so.
      const client = new libs[name].IdempotentClient({ storage: "local", namespace: `fallback-${name}` });
      await client.begin("fallback", post(`${base}/busy`));
      assert.equal(client.storage, "memory");
      reasons[name] = client.storageFallback;
    }
  } finally {
    console.warn = warn;
  }
  assert.match(warned.development, /^idempotent-fetch: intents of namespace "fallback-development" are kept in memory from now on: /);
  assert.equal(warned.production, `idempotent-fetch: storagefallback (${DOCS}; the development build of idempotent-fetch-client says more)`);
  assert.equal(reasons.development, "localStorage is not available here; intents are kept in memory");
  assert.equal(reasons.production, "localStorage is not available here");
});

test("the production build holds none of the development build's texts", () => {
  const production = readFileSync(path.join(pkgDir, BUILDS.production), "utf8");
  const development = readFileSync(path.join(pkgDir, BUILDS.development), "utf8");
  for (const text of ["must be a whole number from", "was begun", "no definite answer after", "discard the intent", "are kept in memory from now on",
    "intents are kept in memory", "reading storage failed", "removing from storage failed"]) {
    assert.ok(development.includes(text), `development: ${text}`);
    assert.ok(!production.includes(text), `production: ${text}`);
  }
});
