// Asking the server what became of a key (the key-status protocol: README, "Your server"). The
// machine decides when to ask and what follows (src/machine/reconcile.rs); this module performs the
// question, through the app's `statusUrl` or its `reconcile` callback, and reads the answer. Every
// answer that is not exactly one of the protocol's shapes is "could not ask", never "unknown":
// taking a 404 or an HTML error page for "unknown" would resend an intent the server may have done.
// Settling (the fence, a POST of the same URL) is here too: the client settles an old key before it
// gives the intent a new one.

import { describe } from "./describe.js";
import { IdempotentFetchError } from "./errors.js";
// The kinds of answer are the machine's (`onKeyStatus`): the contract's KEY_*.
import { KEY_COULD_NOT_ASK, KEY_DONE, KEY_IN_FLIGHT, KEY_UNKNOWN } from "./machine.js";

/** A short rendering of a value read from an answer, for a message. */
function show(value: unknown): string {
  try {
    return String(JSON.stringify(value) ?? typeof value).slice(0, 40);
  } catch {
    return typeof value;
  }
}


/** What the app's `reconcile` callback is asked. */
export interface KeyStatusQuestion {
  /** The intent's id. */
  intentId: string;
  /** The key to look up. */
  key: string;
  /** Aborted when the question is given up (the caller's signal, or the attempt timeout). */
  signal: AbortSignal;
}

/** What the app's `reconcile` callback answers: the server's stored answer for the key (the
 *  Response a replay would have given), in flight, or unknown (no record of the key). */
export type KeyStatusAnswer =
  | {
      /** The server holds the key's answer. */
      status: "done";
      /** That answer, as a replay would have given it. */
      response: Response;
    }
  | {
      /** A request with the key is still running on the server. */
      status: "in_flight";
      /** How long to wait before asking or sending again. */
      retryAfterMs?: number;
    }
  | {
      /** The server has no record of the key. */
      status: "unknown";
    };

/** How the client asks: a URL (a `{key}` template, or a function of the key) answering the
 *  documented shape, or the app's own lookup. */
export interface Reconciler {
  statusUrl: string | ((key: string) => string) | undefined;
  reconcile: ((question: KeyStatusQuestion) => Promise<KeyStatusAnswer>) | undefined;
}

/** @internal One answer, read: its kind, the stored answer (done), its Retry-After (in flight), or
 *  why it could not be read. */
export interface KeyStatusRead {
  kind: number;
  response?: Response;
  /** With `response`: the header names the server's account of its stored answer lists, as it gave
   *  them (the cross-origin diagnosis compares them with what the page was shown). */
  stored?: string[];
  retryAfter?: string | undefined;
  problem?: string;
}

/** `problem` is said in the development build's message only. */
const couldNotAsk = (problem: string | false): KeyStatusRead => ({ kind: KEY_COULD_NOT_ASK, problem: problem || undefined });

/** Answers with no body (a Response cannot be built with one). */
const NULL_BODY = [204, 205, 304];

/** The stored answer of a "done" status body, as the Response a replay would give, and the header
 *  names the body lists. */
function storedResponse(value: unknown): { response: Response; stored: string[] } | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  const { status, headers, body } = value as Record<string, unknown>;
  if (typeof status !== "number" || !Number.isInteger(status) || status < 200 || status > 599) return undefined;
  if (typeof body !== "string" && body !== undefined && body !== null) return undefined;
  if (headers !== undefined && (typeof headers !== "object" || headers === null)) return undefined;
  const pairs = Object.entries((headers ?? {}) as Record<string, unknown>);
  if (!pairs.every(([, v]) => typeof v === "string")) return undefined;
  try {
    const response = new Response(NULL_BODY.includes(status) ? null : (body ?? ""), { status, headers: pairs as [string, string][] });
    const stored = [...response.headers.keys()];
    response.headers.set("idempotent-replayed", "true");
    return { response, stored };
  } catch {
    return undefined; // a header name or value fetch refuses
  }
}

/** @internal Reads a status body of the documented shape (`key`, when the server adds it, must be ours). */
export function readStatusBody(value: unknown, key: string, retryAfter: string | undefined): KeyStatusRead {
  if (typeof value !== "object" || value === null) return couldNotAsk(__DEV__ && "not a JSON object");
  const body = value as Record<string, unknown>;
  if (body.key !== undefined && body.key !== key) return couldNotAsk(__DEV__ && "about another key");
  switch (body.status) {
    case "done": {
      const read = storedResponse(body.response);
      return read ? { kind: KEY_DONE, ...read } : couldNotAsk(__DEV__ && '"done" without a usable response');
    }
    case "in_flight":
      return { kind: KEY_IN_FLIGHT, retryAfter };
    case "unknown":
      return { kind: KEY_UNKNOWN };
    // Settled as never seen (the fence): no request with the key will do the work, and sending it
    // again gets the server's definite 410, so for a question it reads as "never arrived".
    case "fenced":
      return { kind: KEY_UNKNOWN };
    default:
      return couldNotAsk(__DEV__ && `status ${show(body.status)}`);
  }
}

/** The app's callback's answer, checked like a server's. */
function readCallbackAnswer(answer: unknown): KeyStatusRead {
  if (typeof answer !== "object" || answer === null) return couldNotAsk(__DEV__ && "not an object");
  const { status, response, retryAfterMs } = answer as Record<string, unknown>;
  if (status === "done") {
    return response instanceof Response ? { kind: KEY_DONE, response, stored: [...response.headers.keys()] } : couldNotAsk(__DEV__ && '"done" without a Response');
  }
  if (status === "in_flight") {
    const ok = typeof retryAfterMs === "number" && Number.isFinite(retryAfterMs) && retryAfterMs >= 0;
    return { kind: KEY_IN_FLIGHT, retryAfter: ok ? String(Math.ceil(retryAfterMs / 1000)) : undefined };
  }
  if (status === "unknown") return { kind: KEY_UNKNOWN };
  return couldNotAsk(__DEV__ && `status ${show(status)}`);
}

/** The status URL of `key`: the template with `{key}` replaced (percent-encoded), or the app's
 *  function's answer, resolved against the request's URL. */
function statusUrlOf(statusUrl: string | ((key: string) => string), key: string, base: string): string {
  const url = typeof statusUrl === "function" ? statusUrl(key) : statusUrl.split("{key}").join(encodeURIComponent(key));
  return new URL(url, base).href;
}

/** One question to the status URL within `timeoutMs` (and the caller's `signal`): GET asks, POST settles.
 *  The request's own headers go with it (its credentials, never stored), without its body. Resolves the
 *  answer's status and parsed JSON body (undefined when not JSON), or rejects as fetch does. */
async function askStatusUrl(
  statusUrl: string | ((key: string) => string),
  method: "GET" | "POST",
  request: { url: string; headers: [string, string][] },
  key: string,
  signal: AbortSignal,
): Promise<{ status: number; body: unknown; retryAfter: string | undefined }> {
  const headers = new Headers(request.headers);
  headers.delete("content-type");
  headers.set("accept", "application/json");
  const answer = await fetch(statusUrlOf(statusUrl, key, request.url), { method, headers, signal });
  if (answer.status !== 200) {
    answer.body?.cancel().catch(() => {});
    return { status: answer.status, body: undefined, retryAfter: undefined };
  }
  let body: unknown;
  try {
    body = JSON.parse(await answer.text());
  } catch {
    body = undefined;
  }
  return { status: 200, body, retryAfter: answer.headers.get("retry-after") ?? undefined };
}

/** A timer and the caller's signal as one signal; `done()` lets go of both. */
function deadline(timeoutMs: number, signal: AbortSignal | undefined): { signal: AbortSignal; done: () => void } {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), Math.min(Math.max(timeoutMs, 1), 0x7fffffff));
  const onAbort = () => controller.abort();
  signal?.addEventListener("abort", onAbort);
  return {
    signal: controller.signal,
    done: () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
    },
  };
}

/**
 * @internal
 * Asks about `key` within `timeoutMs` (and the caller's `signal`): the app's callback, or a GET of
 * the status URL. Never rejects: any failure is "could not ask", with why.
 */
export async function askKeyStatus(
  how: Reconciler,
  request: { url: string; headers: [string, string][] },
  intentId: string,
  key: string,
  timeoutMs: number,
  signal: AbortSignal | undefined,
): Promise<KeyStatusRead> {
  const limit = deadline(timeoutMs, signal);
  try {
    if (how.reconcile) return readCallbackAnswer(await how.reconcile({ intentId, key, signal: limit.signal }));
    if (!how.statusUrl) return couldNotAsk(__DEV__ && "no statusUrl");
    const answer = await askStatusUrl(how.statusUrl, "GET", request, key, limit.signal);
    if (answer.status !== 200) return couldNotAsk(__DEV__ && `HTTP ${answer.status}`);
    if (answer.body === undefined) return couldNotAsk(__DEV__ && "not JSON");
    return readStatusBody(answer.body, key, answer.retryAfter);
  } catch (thrown) {
    return couldNotAsk(__DEV__ && (limit.signal.aborted ? "timed out" : describe(thrown)));
  } finally {
    limit.done();
  }
}

/** Statuses a server without the settle request answers a POST to its status URL with: not found,
 *  method not allowed, not implemented. */
const NO_FENCE_STATUSES = [404, 405, 501];

/**
 * @internal
 * `settle()` of an intent (the fence: a POST of the status URL, server/README.md "Key status"): the
 * server answers done (then `ask()` reads the answer, which the machine records), in flight, or fenced
 * (it had never seen the key and now never may). An app's own `reconcile` callback cannot settle: that
 * is "no_fence". Rejects `INVALID_OPTIONS` without a way to ask, `ABORTED` when `signal` aborted,
 * `RECONCILE_FAILED` when the server could not be asked.
 */
export async function settleIntent<Done extends { status: string }>(
  how: Reconciler,
  request: { url: string; headers: [string, string][] },
  key: string,
  timeoutMs: number,
  signal: AbortSignal | undefined,
  ask: () => Promise<Done>,
): Promise<Done | { status: "fenced" | "in_flight" } | { status: "no_fence"; reason: string }> {
  if (!how.statusUrl) {
    if (!how.reconcile) throw new IdempotentFetchError("INVALID_OPTIONS", __DEV__ && "settle() needs the statusUrl option");
    return { status: "no_fence", reason: "only a reconcile callback, which cannot settle a key" };
  }
  const limit = deadline(timeoutMs, signal);
  let problem: string;
  try {
    const answer = await askStatusUrl(how.statusUrl, "POST", request, key, limit.signal);
    const body = answer.body as Record<string, unknown> | undefined;
    if (NO_FENCE_STATUSES.includes(answer.status)) return { status: "no_fence", reason: `HTTP ${answer.status} to POST` };
    // A server that answers POST like GET says "unknown": it recorded nothing.
    if (body?.status === "unknown") return { status: "no_fence", reason: '"unknown" to POST' };
    if (answer.status !== 200) problem = `HTTP ${answer.status}`;
    else if (typeof body !== "object" || body === null) problem = "not a JSON object";
    else if (body.key !== undefined && body.key !== key) problem = "about another key";
    else if (body.status === "fenced" || body.status === "in_flight") return { status: body.status };
    else if (body.status === "done") {
      const asked = await ask();
      if (asked.status === "done") return asked;
      problem = `settled as done, then asked: ${asked.status}`;
    } else problem = `status ${show(body.status)}`;
  } catch (thrown) {
    if (thrown instanceof IdempotentFetchError) throw thrown;
    problem = limit.signal.aborted ? "timed out" : describe(thrown);
  } finally {
    limit.done();
  }
  if (signal?.aborted) throw new IdempotentFetchError("ABORTED", __DEV__ && "aborted by the caller; the key is kept", { key });
  throw new IdempotentFetchError("RECONCILE_FAILED", __DEV__ && `the server could not be asked to settle the key (${problem})`, { key });
}
