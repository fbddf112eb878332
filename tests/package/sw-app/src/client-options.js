// The options of every client of the app, the page's and the service worker's ("give the worker's
// client the pages' namespace and options"): one account, IndexedDB, and a short retry policy.
export const clientOptions = {
  namespace: "acct_42",
  storage: "indexeddb",
  retry: { maxAttempts: 3, baseDelayMs: 100, maxDelayMs: 200 },
};
