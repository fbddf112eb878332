// An agent's tool call as a separate Node process, with durable keys in a folder
// (idempotent-fetch-client/file). Run by tests/js/file-storage.test.mjs:
//   node agent.mjs <pkg dir> <records dir> <server url> <bearer token> <namespace>
// begins "tool-call:order-42" (or resumes it: same key), prints {"event":"key",...} once the key is
// known and {"event":"retry",...} at each retry, then {"event":"done",...} or {"event":"error",...}.
import path from "node:path";
import { pathToFileURL } from "node:url";

const [pkg, directory, server, token, namespace] = process.argv.slice(2);
const { IdempotentClient } = await import(pathToFileURL(path.join(pkg, "node.js")).href);
const { fileStorage } = await import(pathToFileURL(path.join(pkg, "file.js")).href);
const say = (event) => console.log(JSON.stringify(event));

const client = new IdempotentClient({
  namespace,
  storage: fileStorage({ directory }),
  requireDurable: true,
  retry: { baseDelayMs: 100, maxDelayMs: 300, maxAttempts: 50, totalTimeoutMs: 120_000 },
});
client.addEventListener("storagefallback", (event) => say({ event: "fallback", reason: event.reason }));
try {
  const op = await client.begin("tool-call:order-42", {
    url: `${server}/api/orders`,
    headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
    body: JSON.stringify({ items: [{ sku: "mug", qty: 2 }] }),
  });
  say({ event: "key", key: op.key, resumed: op.resumed, attempts: op.attempts, storage: client.storage });
  const result = await op.send({ onRetry: (e) => say({ event: "retry", attempt: e.attempt, reason: e.reason }) });
  say({ event: "done", key: result.key, status: result.status, durable: result.durable, order: await result.response.json() });
} catch (error) {
  say({ event: "error", code: error?.code, message: String(error?.message ?? error) });
}
