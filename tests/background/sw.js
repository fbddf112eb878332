// The app's service worker (tests/background): the page's client options (namespace "shop",
// IndexedDB) with a short retry policy and a 64 KiB body cap (the reference server's), and backgroundSync() with the session
// token from the app's own database (null without one: the intent is left to the page).
import { IdempotentClient } from "/pkg/worker.js";
import { backgroundSync } from "/pkg/sw.js";
import { readToken } from "/token.js";

const client = new IdempotentClient({
  namespace: "shop",
  storage: "indexeddb",
  maxBodyBytes: 64 * 1024,
  retry: { maxAttempts: 2, baseDelayMs: 50, maxDelayMs: 100 },
});
backgroundSync({
  client,
  headers: async () => {
    const token = await readToken();
    return token ? { authorization: `Bearer ${token}` } : null;
  },
});

self.addEventListener("install", (event) => event.waitUntil(self.skipWaiting()));
self.addEventListener("activate", (event) => event.waitUntil(self.clients.claim()));
