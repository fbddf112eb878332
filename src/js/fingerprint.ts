// The request fingerprint: HMAC-SHA-256 (hex) of method, URL, content type and body under a random
// secret of the namespace (an unkeyed hash of a body holding a card number can be brute-forced
// offline), so that re-beginning an intent with a changed request is caught
// (INTENT_MISMATCH). `crypto.subtle` for large inputs; the plain-JS SHA-256 in HMAC form for small
// ones and where `crypto.subtle` does not exist (insecure origins: plain http pages). Both give the
// same value. Records of version 1 hold the unkeyed SHA-256 (`secret` undefined) and are matched
// with it until they are retired.

import type { PreparedRequest } from "./request.js";
import { contentTypeOf } from "./request.js";
import { hex, sha256 } from "./sha256.js";

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

/** Inputs up to this many bytes (a usual JSON order) are hashed in plain JS: a `crypto.subtle` call
 *  answers on another thread, two round trips with the key import, and below ~1 KiB the plain hash is
 *  as fast or faster (12-30 µs for 100 B against 17-50 µs in headless Chromium, both warm). */
const SUBTLE_FROM = 1024;

/** The request's fingerprint (64 lowercase hex characters): keyed with `secret`, or the plain SHA-256
 *  of a version-1 record when `secret` is undefined. */
export async function fingerprint(request: PreparedRequest, secret?: Uint8Array<ArrayBuffer>): Promise<string> {
  const data = fingerprintInput(request);
  if (data.length > SUBTLE_FROM) {
    try {
      const subtle = crypto.subtle;
      return hex(
        new Uint8Array(
          secret
            ? await subtle.sign("HMAC", await subtle.importKey("raw", secret, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]), data)
            : await subtle.digest("SHA-256", data),
        ),
      );
    } catch {
      // No crypto.subtle (insecure origins: plain http pages have none), or one that fails (a broken
      // polyfill must not stop a payment): the plain-JS SHA-256 below, which gives the same value.
    }
  }
  return hex(secret ? hmacSha256(secret, data) : sha256(data));
}

/** RFC 2104 HMAC with the plain-JS SHA-256 (64-byte blocks). */
export function hmacSha256(secret: Uint8Array, data: Uint8Array): Uint8Array {
  const block = new Uint8Array(64);
  block.set(secret.length > 64 ? sha256(secret) : secret);
  const inner = new Uint8Array(64 + data.length);
  const outer = new Uint8Array(64 + 32);
  for (let i = 0; i < 64; i++) {
    inner[i] = block[i] ^ 0x36;
    outer[i] = block[i] ^ 0x5c;
  }
  inner.set(data, 64);
  outer.set(sha256(inner), 64);
  return sha256(outer);
}
