// Background completion: the names a page and its service worker share (the core imports them for
// `begin(..., { background: true })`, `idempotent-fetch-client/sw` for the worker, the intent store to follow
// the worker's messages), and the page's half, which asks the browser for a Background Sync where it
// has one.

/** The Background Sync tag the page registers for an intent begun with `background: true`, and the
 *  one `backgroundSync()` listens to by default. */
export const BACKGROUND_SYNC_TAG = "idempotent-fetch";

/** The `BroadcastChannel` on which `backgroundSync()` posts what became of each intent it tried
 *  (a `BackgroundMessage`). */
export const BACKGROUND_CHANNEL = "idempotent-fetch";

/** The `type` of every message posted on {@link BACKGROUND_CHANNEL}. */
export const BACKGROUND_MESSAGE_TYPE = "idempotent-fetch:background";

/** Asks the browser to wake the origin's service worker with a `sync` event once it is online
 *  (Background Sync: Chromium-based browsers). Where there is no service worker registration or no
 *  Background Sync, nothing happens: the worker finishes the intent when it starts, comes online or
 *  the next page of the origin loads. Never throws, never waits: the page's own send goes on. */
export function registerBackgroundSync(): void {
  try {
    const container = (globalThis as { navigator?: { serviceWorker?: ServiceWorkerContainer } }).navigator?.serviceWorker;
    // getRegistration, not `ready`: `ready` never settles on a page without a service worker.
    void container
      ?.getRegistration()
      .then((registration) => (registration as { sync?: { register(tag: string): Promise<void> } } | undefined)?.sync?.register(BACKGROUND_SYNC_TAG))
      .catch(() => {});
  } catch {
    // a page where reading navigator.serviceWorker throws (a sandboxed frame): no background sync
  }
}
