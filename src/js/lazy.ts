// The parts of the driver a page loads when it first uses them: each is its own file in the package
// (package/build.mjs, LAZY_PARTS), fetched by the dynamic import here, so a page that never uses the
// feature never downloads it. A load is shared by every caller; one that failed (offline before the
// first use) is tried again by the next caller. Once loaded, a part stays (it works offline).

import { IdempotentFetchError } from "./errors.js";

/** Service workers may not `import()` at all: there the package's `idempotent-fetch-client/worker` entry,
 *  which holds every part (its loads below never fail), is the one to use. */
const inServiceWorker = () => typeof (globalThis as { ServiceWorkerGlobalScope?: unknown }).ServiceWorkerGlobalScope === "function";

/** A loader that imports once and keeps the module (again after a failure). */
function once<T>(load: () => Promise<T>): () => Promise<T> {
  let loading: Promise<T> | undefined;
  return () =>
    (loading ??= load().catch((error: unknown) => {
      loading = undefined;
      // Said in both builds: a service worker is mostly met built for production (a dev server
      // cannot serve one: README, "Background completion"), and this names the fix.
      throw inServiceWorker()
        ? new IdempotentFetchError(
            "INVALID_OPTIONS",
            'a service worker cannot load the parts used on demand: import IdempotentClient from "idempotent-fetch-client/worker" there',
          )
        : error;
    }));
}

/** Asking the server about a key (`statusUrl` / `reconcile`). */
export const reconcilePart = once(() => import("./reconcile.js"));

/** A stored intent taken up again by id (`resume`, `reconcile` and `settle` by id): loaded with a
 *  client that persists requests, or when the page is idle with `statusUrl` / `reconcile`. */
export const resumePart = once(() => import("./resume.js"));

/** The cross-origin diagnosis of retried answers. */
export const corsPart = once(() => import("./cors.js"));

/** The key written into the body (`keyIn`): preloaded when the option is set. */
export const placementPart = once(() => import("./placement.js"));

/** Object bodies (Blob, URLSearchParams, FormData, ReadableStream) and `Request` objects. */
export const bodyObjectsPart = once(() => import("./body-objects.js"));

/** The IndexedDB backend (`storage: "indexeddb"`, the default in workers): loaded with the client. */
export const indexedDbPart = once(() => import("./storage/indexeddb.js"));

/** The backend over an app's own storage: loaded with the client. */
export const customStoragePart = once(() => import("./storage/custom.js"));

/** The localStorage lease, where there are no Web Locks: loaded when the page is idle. */
export const leasePart = once(() => import("./lease.js"));

/** A persisted request as stored (its headers, its body out of line): loaded with a client that
 *  persists requests, or by the begin that asks for `background`. */
export const storedRequestPart = once(() => import("./stored-request.js"));

/** The sweep of the stored intents: loaded when the page is idle after the client's first send, or
 *  by `sweep()`. */
export const sweepPart = once(() => import("./sweep.js"));

/** The plain-JS SHA-256 of the fingerprint, where there is no `crypto.subtle` (plain http pages):
 *  preloaded there when the page is idle. */
export const sha256Part = once(() => import("./sha256.js"));
