// The library inside a worker, over the entry its loader passes: agent.mjs (the main entry, for
// module dedicated workers: `new Worker(url, { type: "module" })`) and sw-agent.mjs (idempotent-fetch-client/worker,
// for module service workers, which may not import() the parts the main entry loads on demand). The page sends
// `{ cmd: "run", ... }` with a MessagePort; the answer (or the error) comes back on that port.
//
// status: waits for the library to load; answers the events and the outcome of the detached send so far:
//   { events, outcome, onLine }.
// run: { namespace, options, intentId, url, body, detach, hideIndexedDB }
//   makes a client (options merged with { namespace }), lists pending(), begins the intent and sends
//   it. With `detach` the send is left running and the answer comes back at once (the test then
//   reloads the page or stops the worker mid-retry). Answers the key, the storage in use, the
//   fallback reason and events, pending() before begin, and the send's result.

/** Starts the agent over `lib` (the package's exports); called at the top level of the worker's
 *  module, so its listeners are added while the script is evaluated (service workers require it). */
export function startAgent({ IdempotentClient, ready }) {
  // No top-level await (service workers forbid it) and no init call: the package loads its wasm itself,
  // and the client's first operation waits for it. `status` awaits `ready` to report a failed load.
  const detached = [];
  const status = { events: [], outcome: null };

  globalThis.addEventListener("install", (event) => event.waitUntil?.(globalThis.skipWaiting?.()));
  globalThis.addEventListener("activate", (event) => event.waitUntil?.(globalThis.clients?.claim()));
  globalThis.addEventListener("online", () => status.events.push("scope:online"));
  globalThis.addEventListener("offline", () => status.events.push("scope:offline"));
  globalThis.addEventListener("message", (event) => {
    const port = event.ports?.[0];
    if (!port) return;
    const done = run(event.data).then(
      (value) => port.postMessage({ ok: true, value }),
      (error) => port.postMessage({ ok: false, error: `${error?.name}: ${error?.message} [${error?.code ?? ""}]\n${error?.stack ?? ""}` }),
    );
    // A service worker stays alive while the event is extended.
    event.waitUntil?.(Promise.all([done, ...detached]).catch(() => {}));
  });

  async function run({ cmd, namespace, options = {}, intentId = "checkout:cart-42", url, body = '{"cart":42}', detach = false, hideIndexedDB = false }) {
    if (cmd === "status") {
      await ready;
      return { ...status, onLine: navigator.onLine };
    }
    if (cmd !== "run") throw new Error(`unknown command ${cmd}`);
    if (hideIndexedDB) Object.defineProperty(globalThis, "indexedDB", { value: undefined, configurable: true });
    const fallbackEvents = [];
    const client = new IdempotentClient({ namespace, ...options });
    client.addEventListener("storagefallback", (e) => fallbackEvents.push(e.reason));
    for (const type of ["attempt", "retry", "offline"]) client.addEventListener(type, () => status.events.push(type));
    const pending = (await client.pending()).map((p) => ({ intentId: p.intentId, key: p.key, state: p.state, attempts: p.attempts }));
    const op = await client.begin(intentId, { url, method: "POST", body });
    const answer = {
      key: op.key,
      resumed: op.resumed,
      attemptsBefore: op.attempts,
      pending,
      scope: {
        window: typeof window !== "undefined",
        localStorage: typeof localStorage !== "undefined",
        serviceWorker: typeof ServiceWorkerGlobalScope !== "undefined" && globalThis instanceof ServiceWorkerGlobalScope,
        onLine: navigator.onLine,
        locks: Boolean(navigator.locks),
      },
    };
    if (detach) {
      detached.push(op.send().then(
        (result) => { status.outcome = { status: result.status, key: result.key }; },
        (error) => { status.outcome = { code: error?.code ?? String(error) }; },
      ));
    } else {
      const result = await op.send();
      Object.assign(answer, { status: result.status, resultKey: result.key, attempts: result.attempts });
    }
    // Read last: for "indexeddb" the fallback is known once an operation has settled.
    return { ...answer, storage: client.storage, storageFallback: client.storageFallback, fallbackEvents };
  }
}
