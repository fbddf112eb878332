// The context and helpers of the JavaScript API cases (tests/js/cases.mjs lists the case files).
//
// Imports nothing, so it loads unchanged in Node and in a page. `makeContext` below makes each case's ctx:
//   ctx.lib        the package's exports (IdempotentClient, isIdempotentFetchError, ...)
//   ctx.server     base URL of tests/support/test-server.mjs
//   ctx.storage    the persistent storage kind here: "memory" (Node) or "local" (browser)
//   ctx.browser    true in a page
//   ctx.assert     small assertion helpers (identical in both environments)
//   ctx.ns         a namespace unique to this case; ctx.newNamespace() makes more
//   ctx.client()   a client in ctx.ns with fast retries; ctx.url()/ctx.log() talk to the server
// `runCase` runs one case and then proves the module still works (a trap in wasm would poison
// every later call), so every error case is followed by a successful send.

export const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
export const PREFIX = "idempotent-fetch:v1:";
/** The mark in front of a retired record's slot id (src/js/storage/backend.ts RETIRED). */
export const RETIRED = "\u0002";
/** The localStorage text of intent `id` of namespace `ns`, on either shelf (pending, retired). */
export const storedText = (ns, id) => localStorage.getItem(`${PREFIX}${ns}:${id}`) ?? localStorage.getItem(`${PREFIX}${ns}:${RETIRED}${id}`);
export const SECRET_TOKEN = "secret-token";
export const CARD = "4242424242424242";
/** The Web Storage slot suffix of a namespace's fingerprint secret (a control character: no intent id). */
export const SECRET_SLOT = ":\u0001secret";

// ---------------------------------------------------------------------------------------------
// Context and helpers

let namespaceCounter = 0;

function uniqueNamespace() {
  namespaceCounter += 1;
  const random = Math.floor(Math.random() * 0x7fffffff).toString(36);
  return `t${Date.now().toString(36)}${random}${namespaceCounter}`;
}

class AssertionError extends Error {
  constructor(message) {
    super(message);
    this.name = "AssertionError";
  }
}

function show(value) {
  try {
    return typeof value === "string" ? JSON.stringify(value) : JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

export const assert = {
  ok(value, message) {
    if (!value) throw new AssertionError(message ?? `expected a truthy value, got ${show(value)}`);
  },
  equal(actual, expected, message) {
    if (!Object.is(actual, expected)) {
      throw new AssertionError(`${message ? message + ": " : ""}expected ${show(expected)}, got ${show(actual)}`);
    }
  },
  notEqual(actual, unexpected, message) {
    if (Object.is(actual, unexpected)) {
      throw new AssertionError(`${message ? message + ": " : ""}expected anything but ${show(unexpected)}`);
    }
  },
  deepEqual(actual, expected, message) {
    if (JSON.stringify(actual) !== JSON.stringify(expected)) {
      throw new AssertionError(`${message ? message + ": " : ""}expected ${show(expected)}, got ${show(actual)}`);
    }
  },
  match(text, pattern, message) {
    if (typeof text !== "string" || !pattern.test(text)) {
      throw new AssertionError(`${message ? message + ": " : ""}expected ${show(text)} to match ${pattern}`);
    }
  },
  fail(message) {
    throw new AssertionError(message);
  },
  /** Expects an IdempotentFetchError with `code` (from a promise, or a function that throws or rejects). */
  async rejects(promiseOrFn, code, message) {
    let error;
    try {
      const value = typeof promiseOrFn === "function" ? promiseOrFn() : promiseOrFn;
      await value;
    } catch (e) {
      error = e;
    }
    const what = message ? message + ": " : "";
    if (error === undefined) throw new AssertionError(`${what}expected an IdempotentFetchError ${code}, but it succeeded`);
    if (!(error instanceof Error)) throw new AssertionError(`${what}expected an Error, got ${show(error)}`);
    if (error.name !== "IdempotentFetchError") {
      throw new AssertionError(`${what}expected name IdempotentFetchError, got ${error.name}: ${error.message}`);
    }
    if (error.code !== code) throw new AssertionError(`${what}expected code ${code}, got ${error.code}: ${error.message}`);
    return error;
  },
  /** Same as `rejects` for something that must throw synchronously (the constructor). */
  throws(fn, code, message) {
    let error;
    try {
      fn();
    } catch (e) {
      error = e;
    }
    const what = message ? message + ": " : "";
    if (error === undefined) throw new AssertionError(`${what}expected ${code} to be thrown`);
    if (error.name !== "IdempotentFetchError" || error.code !== code) {
      throw new AssertionError(`${what}expected IdempotentFetchError ${code}, got ${error.name} ${error.code}: ${error.message}`);
    }
    return error;
  },
};

export function makeContext({ lib, server, storage, browser }) {
  const ns = uniqueNamespace();
  const ctx = {
    lib,
    server,
    storage,
    browser: Boolean(browser),
    assert,
    ns,
    newNamespace: uniqueNamespace,
    sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
    /** A client with fast retries (1..5 ms) in `ctx.ns` unless options say otherwise. */
    client(options = {}) {
      const { retry, ...rest } = options;
      return new lib.IdempotentClient({
        namespace: ns,
        storage,
        retry: { baseDelayMs: 1, maxDelayMs: 5, ...retry },
        ...rest,
      });
    },
    /** URL of a scripted scenario; scenario names are prefixed with the namespace (unique).
     *  `close=1`: a fresh connection per attempt, so the browser never re-sends one by itself. */
    url(scenario, script = "201") {
      return `${server}/s/${ns}-${scenario}?script=${encodeURIComponent(script)}&close=1`;
    },
    /** A `statusUrl` template answering the key-status protocol with the steps of `script`. */
    ksUrl(scenario, script) {
      return `${server}/ks/${ns}-${scenario}/{key}?script=${encodeURIComponent(script)}`;
    },
    /** What the server received for `scenario`. */
    async log(scenario) {
      const response = await fetch(`${server}/log/${ns}-${scenario}`);
      return response.json();
    },
    async waitFor(predicate, what, timeoutMs = 5000) {
      const until = Date.now() + timeoutMs;
      for (;;) {
        const value = await predicate();
        if (value) return value;
        if (Date.now() > until) throw new AssertionError(`timed out waiting for ${what}`);
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    },
    /** The keys this client's namespace has in a Web Storage area (browser only). */
    slots(area = globalThis.localStorage) {
      const out = [];
      for (let i = 0; i < area.length; i++) {
        const key = area.key(i);
        // Intent slots only: the namespace's fingerprint secret has its own (SECRET_SLOT).
        if (key.startsWith(`${PREFIX}${ns}:`) && !key.endsWith(SECRET_SLOT)) out.push(key);
      }
      return out;
    },
  };
  return ctx;
}

/** Runs a case, then proves the module still works with a fresh client. */
export async function runCase(testCase, ctx) {
  await testCase.run(ctx);
  await stillWorks(ctx);
}

async function stillWorks(ctx) {
  const { assert } = ctx;
  const client = new ctx.lib.IdempotentClient({ namespace: ctx.newNamespace(), storage: "memory" });
  const op = await client.begin("sanity", { url: ctx.url("sanity", "201"), body: "ok" });
  const result = await op.send();
  assert.equal(result.status, 201, "module still works after the case");
  assert.equal(ctx.lib.isIdempotentFetchError(new Error("x")), false);
}

export function base64ToBytes(text) {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

export function sameBytes(a, b) {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

export function hex(bytes) {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** Every key and value of localStorage and sessionStorage, as one list of strings. */
export function allStoredText() {
  const out = [];
  for (const area of [globalThis.localStorage, globalThis.sessionStorage]) {
    for (let i = 0; i < area.length; i++) {
      const key = area.key(i);
      out.push(key, area.getItem(key));
    }
  }
  return out;
}

/** Temporarily replaces a property (restored by the returned function). Also used by tests/fault/bad-input-cases.mjs (through ../cases.mjs). */
export function override(target, name, descriptor) {
  const original = Object.getOwnPropertyDescriptor(target, name);
  Object.defineProperty(target, name, { configurable: true, ...descriptor });
  return () => {
    if (original) Object.defineProperty(target, name, original);
    else delete target[name];
  };
}

/** The `add(name, run, options)` of a case file: appends `{ name, run, ...options }` to `cases`. */
export const adder = (cases) => (name, run, options = {}) => cases.push({ name, run, ...options });
