// The requests the check sends (Node's global fetch; node:http for the concurrent burst, which must
// hold each request back until all are ready) and what it reads of an answer: the status, the body as
// text (compared byte for byte), the replay marker and `Retry-After`.
import { webcrypto } from "node:crypto";
import http from "node:http";
import https from "node:https";
import { performance } from "node:perf_hooks";

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

/** A burst's answers (or why each got none) and whether the requests overlapped. */
export interface Burst {
  settled: PromiseSettledResult<Answer>[];
  /** Milliseconds from the release (the last request's last byte written) to the first answer;
   *  negative when an answer came back before every request was whole. */
  firstAnswerMs: number;
}

/**
 * POSTs `body` `count` times with one key, each on its own connection, released together: every
 * request is sent but for its body's last byte, and when all are written so, the last bytes go out
 * at once. Requests sent one after another on fresh connections do not overlap when the endpoint
 * answers faster than a connection opens, and then a server without an in-flight lock looks right.
 */
export async function burst(options: CheckOptions, keyHeader: string, body: string, count: number): Promise<Burst> {
  const headers = headersWith(options, { "idempotency-key": keyHeader });
  if (!headers.has("content-type")) headers.set("content-type", "application/json");
  const bytes = Buffer.from(body, "utf8");
  const outgoing = { ...Object.fromEntries(headers), "content-length": String(bytes.length), connection: "close" };
  const client = options.url.protocol === "https:" ? https : http;
  let firstAt = Infinity;
  const requests = Array.from({ length: count }, () => {
    const request = client.request(options.url, { method: "POST", headers: outgoing, agent: false, timeout: REQUEST_TIMEOUT_MS });
    const held = new Promise<void>((resolve, reject) => {
      request.once("error", reject);
      request.write(bytes.subarray(0, bytes.length - 1), (error) => (error ? reject(error) : resolve()));
    });
    const answer = new Promise<Answer>((resolve, reject) => {
      request.once("error", (error) => reject(new NoAnswer(`POST ${options.url.href} got no answer (${error.message})`)));
      request.once("timeout", () => request.destroy(new Error(`no answer within ${REQUEST_TIMEOUT_MS / 1000} s`)));
      request.once("response", (response) => {
        firstAt = Math.min(firstAt, performance.now());
        const chunks: Buffer[] = [];
        response.on("data", (chunk: Buffer) => chunks.push(chunk));
        response.once("error", (error) => reject(new NoAnswer(`POST ${options.url.href}: the answer broke off (${error.message})`)));
        response.once("end", () => {
          const received = new Headers();
          for (const [name, value] of Object.entries(response.headers)) {
            for (const one of Array.isArray(value) ? value : value === undefined ? [] : [value]) received.append(name, one);
          }
          resolve({ status: response.statusCode ?? 0, headers: received, body: Buffer.concat(chunks).toString("utf8"), marker: markerOf(received), retryAfter: received.get("retry-after") });
        });
      });
    });
    // Settled now, so a rejection before `allSettled` below is never unhandled.
    answer.catch(() => {});
    return { request, held, answer };
  });
  // Every request whole but its last byte (a connection that failed is that request's lost answer).
  await Promise.allSettled(requests.map((r) => r.held));
  const last = bytes.subarray(bytes.length - 1);
  const ended = requests.map(
    ({ request }) =>
      new Promise<void>((resolve) => {
        // A request that failed before its release is already that request's lost answer.
        if (request.destroyed) return resolve();
        request.once("close", () => resolve());
        request.end(last, () => resolve());
      }),
  );
  await Promise.all(ended);
  const releasedAt = performance.now();
  const settled = await Promise.allSettled(requests.map((r) => r.answer));
  return { settled, firstAnswerMs: firstAt - releasedAt };
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
