// The parts of the driver a page loads when it first uses them: each is its own file in the package
// (package/build.mjs, LAZY_PARTS), fetched by the dynamic import here, so a page that never uses the
// feature never downloads it. A load is shared by every caller; one that failed (offline before the
// first use) is tried again by the next caller. Once loaded, a part stays (it works offline).

/** A loader that imports once and keeps the module (again after a failure). */
function once<T>(load: () => Promise<T>): () => Promise<T> {
  let loading: Promise<T> | undefined;
  return () =>
    (loading ??= load().catch((error: unknown) => {
      loading = undefined;
      throw error;
    }));
}

/** Asking the server about a key (`statusUrl` / `reconcile`). */
export const reconcilePart = once(() => import("./reconcile.js"));

/** The cross-origin diagnosis of retried answers. */
export const corsPart = once(() => import("./cors.js"));

/** The key written into the body (`keyIn`): preloaded when the option is set. */
export const placementPart = once(() => import("./placement.js"));

/** Object bodies (Blob, URLSearchParams, FormData, ReadableStream) and `Request` objects. */
export const bodyObjectsPart = once(() => import("./body-objects.js"));
