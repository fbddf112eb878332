// One attempt over the global `fetch` (bound at call time: workers, Node and test stubs alike): a
// fresh AbortController per attempt, aborted by the attempt timeout or by the caller's signal, the
// key header set every time; the timer and the signal link are undone whichever way it ends.
//
// An attempt ends when the whole answer is held, not when its headers arrive: the body is read (from
// a clone, so the caller still gets the engine's own Response) while the timer and the signal still
// run, and the attempt is an answer only if neither fired by then. WebKit can resolve `fetch` with a
// Response whose body the attempt's own abort already killed; reported as a definite answer, that
// retires the key of a payment the caller cannot read (docs/ARCHITECTURE.md, "An answer that races
// its timer"). The machine then applies its own rule to the time the answer was held.
import { EV_ABORT, EV_NETWORK_ERROR, EV_TIMEOUT } from "./machine.js";
import type { PreparedRequest } from "./request.js";

/** How an attempt ended: the answer, or the machine's event for no answer (`EV_NETWORK_ERROR`,
 *  `EV_TIMEOUT` or `EV_ABORT`). */
export type AttemptOutcome = Response | number;

export async function sendAttempt(
  request: PreparedRequest,
  keyHeader: string | undefined,
  keyValue: string,
  timeoutMs: number,
  signal: AbortSignal | undefined,
  /** An observer's header for this attempt (observer.ts), set before the key's. */
  extra?: [name: string, value: string] | void,
): Promise<AttemptOutcome> {
  if (signal?.aborted) return EV_ABORT;
  const controller = new AbortController();
  let timedOut = false;
  const timer = setTimeout(
    () => {
      timedOut = true;
      controller.abort();
    },
    Math.min(Math.max(timeoutMs, 1), 0x7fffffff),
  );
  const onAbort = () => controller.abort();
  signal?.addEventListener("abort", onAbort);
  try {
    const headers = new Headers(request.headers);
    if (request.body?.contentType) headers.set("content-type", request.body.contentType);
    if (extra) headers.set(...extra);
    if (keyHeader) headers.set(keyHeader, keyValue);
    const response = await fetch(request.url, {
      method: request.method,
      headers,
      // fetch copies the bytes ("extract a body"), so the same buffer serves every attempt.
      body: request.body ? request.body.bytes : null,
      signal: controller.signal,
    });
    // The clone's branch of the body is read to its end: the original's branch then holds every
    // byte, and nothing aborts it after this function returns (the timer is cleared, the link undone).
    if (!timedOut && !signal?.aborted) await response.clone().arrayBuffer();
    const late = signal?.aborted ? EV_ABORT : timedOut ? EV_TIMEOUT : undefined;
    if (late === undefined) return response;
    response.body?.cancel().catch(() => {});
    return late;
  } catch {
    return signal?.aborted ? EV_ABORT : timedOut ? EV_TIMEOUT : EV_NETWORK_ERROR;
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener("abort", onAbort);
  }
}
