// The app's service worker, as the README shows it: the pages' client options and backgroundSync().
// The account is the session cookie, which goes with the worker's same-origin requests.
import { IdempotentClient } from "idempotent-fetch-client/worker";
import { backgroundSync } from "idempotent-fetch-client/sw";
import { clientOptions } from "./client-options.js";

const client = new IdempotentClient(clientOptions); // the page's options
backgroundSync({ client });

self.addEventListener("install", (event) => event.waitUntil(self.skipWaiting()));
self.addEventListener("activate", (event) => event.waitUntil(self.clients.claim()));
