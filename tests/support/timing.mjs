// Waiting helpers shared by the Node test runners.
//
//   waitFor(predicate, what, timeoutMs, intervalMs)  polls an (async) predicate until it returns a
//                                                    truthy value, which it resolves to; throws
//                                                    "timed out after N ms waiting for <what>"
//   withTimeout(promise, ms, what)                   rejects with "<what> timed out after N ms" if
//                                                    `promise` takes longer (it is not cancelled)

export async function waitFor(predicate, what, timeoutMs = 10_000, intervalMs = 20) {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const value = await predicate();
    if (value) return value;
    if (Date.now() > until) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

export function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms); });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
