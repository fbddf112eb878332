// A persisted request (`persistRequest`, `begin(…, { background: true })`) as it is stored: never its
// credentials, and a body larger than INLINE_BODY_MAX out of line, as base64 text in a slot of its
// own (BODY + the intent id, in the record's storage), written before the record that names it and
// deleted with it (store.ts). A part loaded on first use (lazy.ts: with a client that persists
// requests, or by the begin or resume that needs it), so a page that never persists a request never
// downloads it.
//
// What is checked when it is read back: the slot holds base64 of exactly the length the record
// names, or the intent is a STORAGE error; the bytes are then part of the whole request that
// `resume` checks against the record's keyed fingerprint (an HMAC under the namespace's secret)
// before anything is sent, so altered bytes of the same length are a STORAGE error too.

import type { PersistedRequest } from "./record.js";
import type { PreparedRequest } from "./request.js";
import { BODY } from "./storage/backend.js";
import type { Store } from "./storage/store.js";

/** Bytes per `String.fromCharCode` call (its arguments are on the stack). */
const CHUNK = 0x8000;

/** Writes `request`'s body to its slot; the request as its record then names it. (The store falls
 *  back to memory rather than refuse a write, as for the record that follows.) */
export async function storeBody(store: Store, intentId: string, request: PersistedRequest & { body: number[] }): Promise<PersistedRequest> {
  const { body } = request;
  let binary = "";
  for (let i = 0; i < body.length; i += CHUNK) binary += String.fromCharCode(...body.slice(i, i + CHUNK));
  await store.put(BODY + intentId, btoa(binary));
  return { ...request, body: body.length };
}

/** The body its record names, read back: `length` bytes, or undefined when the slot is missing, not
 *  base64 or not of that length (the caller's STORAGE error). Rejects as the store does when it
 *  cannot be read. */
export async function readBody(store: Store, intentId: string, length: number): Promise<Uint8Array<ArrayBuffer> | undefined> {
  const text = await store.get(BODY + intentId);
  let binary: string | undefined;
  try {
    binary = atob(text ?? "");
  } catch {
    return undefined;
  }
  return binary.length === length ? Uint8Array.from(binary, (char) => char.charCodeAt(0)) : undefined;
}

/** Headers never written to storage, whatever `persistHeaders` says: credentials. */
export const NEVER_PERSISTED = ["authorization", "cookie", "proxy-authorization"];

/** The request as stored with `persistRequest` (the body's own content type becomes a header).
 *  Credentials are never stored; with a `persistHeaders` allowlist, only the headers it names (and
 *  the content type, which the fingerprint covers) are. */
export function storedForm(prepared: PreparedRequest, allow: string[] | undefined): PersistedRequest {
  const headers = prepared.headers.filter(
    ([name]) => !NEVER_PERSISTED.includes(name) && (allow === undefined || name === "content-type" || allow.includes(name)),
  );
  if (prepared.body?.contentType) headers.push(["content-type", prepared.body.contentType]);
  return {
    method: prepared.method,
    url: prepared.url,
    headers,
    body: prepared.body ? Array.from(prepared.body.bytes) : null,
  };
}
