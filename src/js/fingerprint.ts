// The request fingerprint: SHA-256 (hex) of method, URL, content type and body, so that re-beginning
// an intent with a changed request is caught (INTENT_MISMATCH). `crypto.subtle` where it exists;
// the plain-JS SHA-256 where it does not (insecure origins: plain http pages).

import type { PreparedRequest } from "./request.js";
import { contentTypeOf } from "./request.js";
import { sha256 } from "./sha256.js";

/** 64 lowercase hex characters. */
export function hex(bytes: Uint8Array): string {
  let out = "";
  for (const byte of bytes) out += (byte < 16 ? "0" : "") + byte.toString(16);
  return out;
}

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

/** The request's fingerprint (64 lowercase hex characters). */
export async function fingerprint(request: PreparedRequest): Promise<string> {
  const data = fingerprintInput(request);
  const subtle = subtleCrypto();
  if (subtle) {
    try {
      return hex(new Uint8Array(await subtle.digest("SHA-256", data)));
    } catch {
      // Fall through: a digest that fails (a broken polyfill) must not stop a payment.
    }
  }
  return hex(sha256(data));
}

function subtleCrypto(): SubtleCrypto | undefined {
  try {
    return (globalThis as { crypto?: { subtle?: SubtleCrypto } }).crypto?.subtle ?? undefined;
  } catch {
    return undefined;
  }
}
