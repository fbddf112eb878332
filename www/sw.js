// The demo's service worker (?background=1, www/app.js): finishes the payment of a tab that was closed
// before the server answered, with the page's key (idempotent-fetch-client/sw). The session is the page's
// HttpOnly cookie, which the worker's same-origin requests carry: no headers() needed.
import { IdempotentClient } from "/pkg/worker.js";
import { backgroundSync } from "/pkg/sw.js";

const params = new URL(location.href).searchParams;
const account = /^[A-Za-z0-9_-]{1,64}$/.test(params.get("account") ?? "") ? params.get("account") : "demo";
const fast = params.get("fast") === "1";
const client = new IdempotentClient({
  namespace: account,
  storage: "indexeddb",
  statusUrl: "/api/idempotency-keys/{key}",
  ...(fast ? { retry: { baseDelayMs: 100, maxDelayMs: 1000, maxAttempts: 5, attemptTimeoutMs: 5000, maxRetryAfterMs: 1000 } } : {}),
});
backgroundSync({ client });

self.addEventListener("install", (event) => event.waitUntil(self.skipWaiting()));
self.addEventListener("activate", (event) => event.waitUntil(self.clients.claim()));
