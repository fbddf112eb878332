// A checkout whose payment the service worker finishes if the tab is closed first (the README's
// "Background completion"). The page tells the test what it sees in data-* attributes of <body>:
// ready (the worker controls the page), key, attempts (answers the page got), and state (what a
// fresh client reads of the intent when the page loads).
import { IdempotentClient } from "idempotent-fetch-client";
import { clientOptions } from "./client-options.js";

const intentId = "checkout:cart-42";
const client = new IdempotentClient(clientOptions);
const pay = document.getElementById("pay");
const status = document.getElementById("status");
const data = document.body.dataset;

pay.onclick = async () => {
  pay.disabled = true;
  const op = await client.begin(intentId, {
    url: "/api/orders",
    method: "POST",
    headers: { "content-type": "application/json" }, // the account: the session cookie
    body: JSON.stringify({ items: [{ sku: "mug", qty: 2 }] }),
  }, { background: true });
  data.key = op.key;
  data.attempts = "0";
  client.addEventListener("retry", () => { data.attempts = String(Number(data.attempts) + 1); });
  status.textContent = "Paying…";
  const result = await op.send().catch((error) => error);
  status.textContent = result.ok ? "Paid" : `Not paid yet (${result.code ?? result.status})`;
};

const intent = await client.intent(intentId);
data.state = intent?.state ?? "none";
if (intent?.state === "succeeded") status.textContent = "Paid (finished in the background)";
await navigator.serviceWorker.register("/sw.js", { type: "module" });
await navigator.serviceWorker.ready;
if (!navigator.serviceWorker.controller) {
  await new Promise((resolve) => navigator.serviceWorker.addEventListener("controllerchange", resolve, { once: true }));
}
pay.disabled = false;
status.textContent = "Ready";
data.ready = "true";
