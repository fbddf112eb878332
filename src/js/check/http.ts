// The requests the check sends (Node's global fetch) and what it reads of an answer: the status, the
// body as text (compared byte for byte), the replay marker and `Retry-After`.
import { webcrypto } from "node:crypto";

import { DEFAULT_REPLAY_HEADERS } from "../options.js";
import type { CheckOptions } from "./args.js";

/** How long one request may take before the check gives up on it. */
const REQUEST_TIMEOUT_MS = 30_000;

/** One answer, as the check compares it. */
export interface Answer {
  status: number;
  headers: Headers;
  /** The body as text (UTF-8). */
  body: string;
  /** The replay marker's header name as the server spelled it (`<name>: true`), or null. */
  marker: string | null;
  retryAfter: string | null;
}

/** A request that got no answer (refused, reset, timed out): the message says which. */
export class NoAnswer extends Error {
  override name = "NoAnswer";
}

/** A fresh key from the CSPRNG (UUID v4), like the client's. */
export const freshKey = (): string => webcrypto.randomUUID();

/** `length` URL-unreserved characters from the CSPRNG (64 symbols: every byte maps without bias). */
export function longKey(length: number): string {
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  return Array.from(webcrypto.getRandomValues(new Uint8Array(length)), (byte) => alphabet[byte & 63]).join("");
}

/** The marker header among the spellings the client reads, when it says `true`. */
function markerOf(headers: Headers): string | null {
  for (const name of DEFAULT_REPLAY_HEADERS) {
    if (headers.get(name)?.trim().toLowerCase() === "true") return name;
  }
  return null;
}

async function exchange(url: URL | string, init: RequestInit): Promise<Answer> {
  let response: Response;
  let body: string;
  try {
    response = await fetch(url, { ...init, redirect: "manual", signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
    body = await response.text();
  } catch (error) {
    const cause = error instanceof Error && error.cause instanceof Error ? `: ${error.cause.message}` : "";
    throw new NoAnswer(`${init.method ?? "GET"} ${String(url)} got no answer (${error instanceof Error ? error.message : String(error)}${cause})`);
  }
  return { status: response.status, headers: response.headers, body, marker: markerOf(response.headers), retryAfter: response.headers.get("retry-after") };
}

/** The user's headers, plus `extra` (which wins). */
function headersWith(options: CheckOptions, extra: Record<string, string>): Headers {
  const headers = new Headers(options.headers);
  for (const [name, value] of Object.entries(extra)) headers.set(name, value);
  return headers;
}

/** POST `body` to the endpoint with `Idempotency-Key: keyHeader` (the header's value as sent). */
export function post(options: CheckOptions, keyHeader: string, body: string, extra: Record<string, string> = {}): Promise<Answer> {
  const headers = headersWith(options, { "idempotency-key": keyHeader, ...extra });
  if (!headers.has("content-type")) headers.set("content-type", "application/json");
  return exchange(options.url, { method: "POST", headers, body });
}

/** GET `url` (resolved against the endpoint) with the user's headers. */
export function get(options: CheckOptions, url: string): Promise<Answer> {
  return exchange(new URL(url, options.url), { method: "GET", headers: headersWith(options, {}) });
}

/** POST `url` (resolved against the endpoint) with the user's headers and no body: settling a key. */
export function settle(options: CheckOptions, url: string): Promise<Answer> {
  return exchange(new URL(url, options.url), { method: "POST", headers: headersWith(options, {}) });
}

/** The CORS preflight a page at `origin` makes before the keyed POST (no credentials, as browsers send it). */
export function preflight(options: CheckOptions, origin: string, requestHeaders: readonly string[]): Promise<Answer> {
  return exchange(options.url, {
    method: "OPTIONS",
    headers: { origin, "access-control-request-method": "POST", "access-control-request-headers": requestHeaders.join(", ") },
  });
}

/** The status and the start of the body, on one line: what a row says it saw. */
export function describe(answer: Answer): string {
  const text = answer.body.replace(/\s+/g, " ").trim();
  const start = text.length > 80 ? `${text.slice(0, 77)}...` : text;
  return start ? `${answer.status} ${start}` : `${answer.status} (empty body)`;
}

/** Two answers are the same answer: the status and the body, byte for byte. */
export const sameAnswer = (a: Answer, b: Answer): boolean => a.status === b.status && a.body === b.body;
