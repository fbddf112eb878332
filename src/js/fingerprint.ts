// The request fingerprint: HMAC-SHA-256 (hex) of method, URL, content type and body under a random
// secret of the namespace (an unkeyed hash of a body holding a card number can be brute-forced
// offline), so that re-beginning an intent with a changed request is caught
// (INTENT_MISMATCH). `crypto.subtle` computes it, with the secret imported as a key once; where
// `crypto.subtle` does not exist (insecure origins: plain http pages) or fails, the plain-JS SHA-256
// in HMAC form (sha256.ts, a part loaded on demand, preloaded there when the page is idle) gives the
// same value. Records of version 1 hold the unkeyed SHA-256 (`secret` undefined) and are matched
// with it until they are retired.

import type { PreparedRequest } from "./request.js";
import { contentTypeOf } from "./request.js";
import { hex } from "./hex.js";
import { sha256Part } from "./lazy.js";

export { hex };

/** The bytes hashed: `METHOD \n URL \n content type \n body`. None of the first three can hold a
 *  newline (methods are tokens, URLs and header values are refused with control characters), so
 *  two different requests never give the same input. */
export function fingerprintInput(request: PreparedRequest): Uint8Array<ArrayBuffer> {
  const head = new TextEncoder().encode(`${request.method}\n${request.url}\n${contentTypeOf(request)}\n`);
  const body = request.body?.bytes ?? new Uint8Array(0);
  const data = new Uint8Array(head.length + body.length);
  data.set(head);
  data.set(body, head.length);
  return data;
}

/** The HMAC key of each secret, imported once (a secret is one object for the life of its client). */
const hmacKeys = new WeakMap<Uint8Array<ArrayBuffer>, Promise<CryptoKey>>();

/** The request's fingerprint (64 lowercase hex characters): keyed with `secret`, or the plain SHA-256
 *  of a version-1 record when `secret` is undefined. */
export async function fingerprint(request: PreparedRequest, secret?: Uint8Array<ArrayBuffer>): Promise<string> {
  const data = fingerprintInput(request);
  try {
    const subtle = crypto.subtle;
    if (!secret) return hex(new Uint8Array(await subtle.digest("SHA-256", data)));
    let key = hmacKeys.get(secret);
    if (!key) hmacKeys.set(secret, (key = subtle.importKey("raw", secret, { name: "HMAC", hash: "SHA-256" }, false, ["sign"])));
    return hex(new Uint8Array(await subtle.sign("HMAC", await key, data)));
  } catch {
    // No crypto.subtle (insecure origins: plain http pages have none), or one that fails (a broken
    // polyfill must not stop a payment): the plain-JS SHA-256, which gives the same value.
    const { sha256, hmacSha256 } = await sha256Part();
    return hex(secret ? hmacSha256(secret, data) : sha256(data));
  }
}
