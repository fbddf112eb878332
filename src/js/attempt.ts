// One attempt over the global `fetch` (bound at call time: workers, Node and test stubs alike): a
// fresh AbortController per attempt, aborted by the attempt timeout or by the caller's signal, the
// key header set every time; the timer and the signal link are undone whichever way it ends.

import type { PreparedRequest } from "./request.js";

/** How an attempt ended. */
export type AttemptOutcome =
  | { kind: "response"; response: Response }
  | { kind: "network" }
  | { kind: "timeout" }
  | { kind: "aborted" };

export async function sendAttempt(
  request: PreparedRequest,
  keyHeader: string,
  keyValue: string,
  timeoutMs: number,
  signal: AbortSignal | undefined,
): Promise<AttemptOutcome> {
  if (signal?.aborted) return { kind: "aborted" };
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
    headers.set(keyHeader, keyValue);
    const response = await fetch(request.url, {
      method: request.method,
      headers,
      // fetch copies the bytes ("extract a body"), so the same buffer serves every attempt.
      body: request.body ? request.body.bytes : null,
      signal: controller.signal,
    });
    return { kind: "response", response };
  } catch {
    if (signal?.aborted) return { kind: "aborted" };
    return timedOut ? { kind: "timeout" } : { kind: "network" };
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener("abort", onAbort);
  }
}
