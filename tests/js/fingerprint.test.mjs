// The fingerprint's SHA-256 fallback (src/js/sha256.ts: pages on plain http have no crypto.subtle)
// against the FIPS 180-4 examples and Node's own SHA-256 on every length around the block edges.
// The TypeScript file is bundled on the fly with esbuild (tools/node_modules: cd tools && npm ci).
// Run: node --test tests/js/fingerprint.test.mjs
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { createRequire } from "node:module";
import path from "node:path";

import { root } from "../support/paths.mjs";
import { DEFINES } from "../../package/build.mjs";

const esbuild = createRequire(path.join(root, "tools/package.json"))("esbuild");
const plain = await esbuild.build({
  define: DEFINES.development, // src/js/mode.ts
  entryPoints: [path.join(root, "src/js/sha256.ts")], bundle: true, format: "esm", write: false, logLevel: "warning",
});
const { sha256 } = await import(`data:text/javascript;base64,${Buffer.from(plain.outputFiles[0].text).toString("base64")}`);

const hex = (bytes) => Buffer.from(bytes).toString("hex");
const node = (bytes) => createHash("sha256").update(bytes).digest("hex");

test("FIPS 180-4 examples", () => {
  const text = (s) => new TextEncoder().encode(s);
  assert.equal(hex(sha256(text(""))), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  assert.equal(hex(sha256(text("abc"))), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  assert.equal(
    hex(sha256(text("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"))),
    "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
  );
  assert.equal(
    hex(sha256(new Uint8Array(1_000_000).fill(0x61))),
    "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0",
  );
});

test("equals Node's SHA-256 for every length 0..300 and a few large random inputs", () => {
  for (let length = 0; length <= 300; length++) {
    const data = new Uint8Array(randomBytes(length));
    assert.equal(hex(sha256(data)), node(data), `length ${length}`);
  }
  for (const length of [4095, 4096, 65_537, 1 << 20]) {
    const data = new Uint8Array(randomBytes(length));
    assert.equal(hex(sha256(data)), node(data), `length ${length}`);
  }
});

test("a view into a larger buffer hashes only the viewed bytes", () => {
  const whole = new Uint8Array(randomBytes(200));
  const view = whole.subarray(13, 113);
  assert.equal(hex(sha256(view)), node(Buffer.from(view)));
});

// The keyed fingerprint's HMAC fallback (src/js/sha256.ts `hmacSha256`, used where crypto.subtle
// is absent) against RFC 4231 and Node's HMAC, keys shorter and longer than the 64-byte block; and
// the fingerprint itself (src/js/fingerprint.ts, with crypto.subtle as in Node).
const { outputFiles } = await esbuild.build({
  define: DEFINES.development, // src/js/mode.ts
  entryPoints: [path.join(root, "src/js/fingerprint.ts")], bundle: true, format: "esm", write: false, logLevel: "warning",
});
const keyed = await import(`data:text/javascript;base64,${Buffer.from(outputFiles[0].text).toString("base64")}`);
const { hmacSha256 } = await import(`data:text/javascript;base64,${Buffer.from(plain.outputFiles[0].text).toString("base64")}`);

test("HMAC-SHA-256 fallback: RFC 4231 cases 1, 2 and 6", () => {
  const text = (s) => new TextEncoder().encode(s);
  assert.equal(
    hex(hmacSha256(new Uint8Array(20).fill(0x0b), text("Hi There"))),
    "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7",
  );
  assert.equal(
    hex(hmacSha256(text("Jefe"), text("what do ya want for nothing?"))),
    "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
  );
  assert.equal(
    hex(hmacSha256(new Uint8Array(131).fill(0xaa), text("Test Using Larger Than Block-Size Key - Hash Key First"))),
    "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54",
  );
});

test("keyed fingerprint: crypto.subtle and the plain-JS HMAC agree, and neither is the plain SHA-256", async () => {
  const { createHmac } = await import("node:crypto");
  const secret = new Uint8Array(randomBytes(32));
  const request = { method: "POST", url: "https://shop.example/pay", headers: [], body: { bytes: new TextEncoder().encode('{"card":"4242424242424242"}'), contentType: "application/json" } };
  const input = keyed.fingerprintInput(request);
  const withSubtle = await keyed.fingerprint(request, secret);
  assert.equal(withSubtle, createHmac("sha256", secret).update(input).digest("hex"));
  assert.equal(hex(hmacSha256(secret, input)), withSubtle, "the fallback gives the same value");
  assert.notEqual(withSubtle, node(input), "not the plain SHA-256 of the request");
  assert.notEqual(withSubtle, node(request.body.bytes), "not the plain SHA-256 of the body");
  assert.equal(await keyed.fingerprint(request), node(input), "no secret: the version-1 plain hash");
  // A second fingerprint with the same secret (its imported key kept) and a large body: the same values.
  assert.equal(await keyed.fingerprint(request, secret), withSubtle, "the same request again");
  const large = { ...request, body: { bytes: new Uint8Array(randomBytes(10_000)), contentType: "application/octet-stream" } };
  const largeInput = keyed.fingerprintInput(large);
  assert.equal(await keyed.fingerprint(large, secret), createHmac("sha256", secret).update(largeInput).digest("hex"), "a large body");
  assert.equal(await keyed.fingerprint(large), node(largeInput), "a large body, no secret");
  for (let n = 0; n < 200; n += 7) {
    const data = new Uint8Array(randomBytes(n));
    const key = new Uint8Array(randomBytes(n));
    assert.equal(hex(hmacSha256(key, data)), createHmac("sha256", key).update(data).digest("hex"), `lengths ${n}`);
  }
});

test("without crypto.subtle the fingerprint loads the plain-JS part and gives the same values", async () => {
  const { createHmac } = await import("node:crypto");
  const secret = new Uint8Array(randomBytes(32));
  const request = { method: "PUT", url: "http://shop.example/pay", headers: [], body: { bytes: new TextEncoder().encode('{"cart":7}'), contentType: "application/json" } };
  const input = keyed.fingerprintInput(request);
  Object.defineProperty(globalThis.crypto, "subtle", { value: undefined, configurable: true });
  try {
    assert.equal(globalThis.crypto.subtle, undefined, "crypto.subtle is hidden");
    assert.equal(await keyed.fingerprint(request, secret), createHmac("sha256", secret).update(input).digest("hex"), "keyed");
    assert.equal(await keyed.fingerprint(request), node(input), "no secret: the version-1 plain hash");
  } finally {
    delete globalThis.crypto.subtle;
  }
  assert.notEqual(globalThis.crypto.subtle, undefined, "crypto.subtle is back");
});
