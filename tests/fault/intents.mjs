// The intents: one cart per intent (its lines encode its number, so an order maps back to it), the key a
// client reports for it, and its outcome.
import { TOTAL, BROWSER_SHARE, NO_BROWSER, INTENTS_PER_ACCOUNT, chance, RETRY, RETRY_SHORT, P_SHORT } from "./options.mjs";
import { figures, problem } from "./report.mjs";

export const SKUS = ["coffee-beans", "grinder", "mug", "filter-papers", "kettle"];

/** Intent number n of an account -> a cart whose lines encode n, so an order maps back to it. */
export function cart(n, id) {
  return JSON.stringify({
    items: [{ sku: "mug", qty: (n % 99) + 1 }, { sku: "kettle", qty: Math.floor(n / 99) + 1 }, { sku: SKUS[n % SKUS.length] === "mug" ? "grinder" : SKUS[n % SKUS.length], qty: 1 }],
    intent: id,
  });
}
export function intentNumberOf(order) {
  const mug = order.items.find((l) => l.sku === "mug");
  const kettle = order.items.find((l) => l.sku === "kettle");
  if (!mug || !kettle) return null;
  return (kettle.qty - 1) * 99 + (mug.qty - 1);
}

export function makeIntents(runId) {
  const intents = [];
  const browserCount = NO_BROWSER ? 0 : Math.round(TOTAL * BROWSER_SHARE);
  for (let i = 0; i < TOTAL; i++) {
    const where = i < TOTAL - browserCount ? "node" : "browser";
    const accountIndex = Math.floor(i / INTENTS_PER_ACCOUNT);
    const n = i % INTENTS_PER_ACCOUNT;
    const account = `f${runId}-${accountIndex}`;
    const id = `checkout:${account}:${n}`;
    intents.push({
      index: i, where, account, n, id, ns: `fault-${account}`, body: cart(n, id),
      retry: chance(P_SHORT) ? RETRY_SHORT : RETRY,
      key: null, keysSeen: new Set(), outcome: null, orderIds: new Set(),
    });
  }
  return intents;
}

export function seeKey(intent, key, where) {
  if (!key) return;
  if (intent.key === null) intent.key = key;
  if (key !== intent.key) {
    figures.checks.keyChanged += 1;
    problem(`${intent.id}: ${where} saw key ${key}, first key ${intent.key}`);
  }
  intent.keysSeen.add(key);
}

export async function record(intent, { result, error }) {
  if (result) {
    seeKey(intent, result.key, "result");
    if (result.ok) {
      const order = await result.response.json();
      intent.outcome = "succeeded";
      intent.orderIds.add(order.id);
      if (order.idempotencyKey !== intent.key) problem(`${intent.id}: answer's order has key ${order.idempotencyKey}`);
    } else {
      intent.outcome = `http${result.status}`;
      problem(`${intent.id}: definite non-2xx answer ${result.status}`);
    }
  } else {
    seeKey(intent, error?.key, "error");
    intent.outcome = "pending";
    intent.pendingCode = `${error?.code ?? "?"}${error?.reason ? `/${error.reason}` : ""}`;
    if (!["RETRIES_EXHAUSTED", "ABORTED"].includes(error?.code)) problem(`${intent.id}: unexpected error ${error?.code}: ${error?.message ?? error}`);
  }
}
