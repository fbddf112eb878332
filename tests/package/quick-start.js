// The README "Quick start (JavaScript)", as a developer would paste it into a fresh app. No init call:
// the package loads its wasm itself and the first `begin` waits for it. tests/js/package.test.mjs
// copies this file as main.js into each app (Vite, webpack, plain ES modules with an import map).
import { IdempotentClient, isIdempotentFetchError } from "idempotent-fetch-client";

const account = "acct_42";
const client = new IdempotentClient({ namespace: account });   // one namespace per signed-in account

const cartId = "cart-42";
const cart = { items: [{ sku: "mug", qty: 2 }] };

const payButton = document.getElementById("pay");
const status = document.getElementById("status");
const receipt = document.getElementById("receipt");

function showReceipt(order) {
  receipt.textContent = JSON.stringify(order, null, 2);
  status.textContent = `Paid: order ${order.id}`;
  document.body.dataset.result = "paid";
  document.body.dataset.orderId = order.id;
}
function showProblem(problem) {
  status.textContent = `Problem: ${problem.title ?? "unknown"}`;
  document.body.dataset.result = "problem";
}
function showTryAgain() {
  status.textContent = "No answer yet. Try again.";
  document.body.dataset.result = "try-again";
}

payButton.onclick = async () => {
  // The user clicked Pay: begin the intent, or resume it after a reload (same key).
  const op = await client.begin(`checkout:${cartId}`, {
    url: "/api/orders",
    method: "POST",
    headers: { "content-type": "application/json" },   // the account: the session cookie of the page
    body: JSON.stringify(cart),
  });
  document.body.dataset.key = op.key;
  try {
    const { response, ok, replayed } = await op.send({
      onRetry: (e) => status.textContent = `Retrying in ${Math.ceil(e.delayMs / 1000)} s (${e.reason})`,
    });
    document.body.dataset.replayed = String(replayed);
    if (ok) showReceipt(await response.json());          // 2xx (replayed: the server had already done it)
    else showProblem(await response.json());              // a definite 4xx: the user must fix something
  } catch (error) {
    if (isIdempotentFetchError(error) && error.code === "RETRIES_EXHAUSTED") {
      showTryAgain();   // the key is kept: "Try again" calls op.send() again (or begin after a reload)
    } else throw error;
  }
};

payButton.disabled = false;
status.textContent = "Ready";
document.body.dataset.ready = "true";
