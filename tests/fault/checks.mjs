// The checks against the server: every order maps to one intent, and past the database one charge and one
// confirmation per order.
import { sleep } from "./options.mjs";
import { figures, problem } from "./report.mjs";
import { intentNumberOf } from "./intents.mjs";

export async function ordersOf(server, account) {
  const orders = await server.orders(account);
  if (orders.length >= 100) problem(`${account}: 100 orders listed, the list may be truncated`);
  return orders;
}

/** Maps the server's orders onto the intents. Returns { duplicates, lost, orphans }. */
export async function compare(server, intents, { final }) {
  const byAccount = new Map();
  for (const intent of intents) {
    if (!byAccount.has(intent.account)) byAccount.set(intent.account, []);
    byAccount.get(intent.account)[intent.n] = intent;
  }
  let duplicates = 0;
  let lost = 0;
  let orphans = 0;
  for (const [account, list] of byAccount) {
    const orders = await ordersOf(server, account);
    const byIntent = new Map();
    const byKey = new Map();
    for (const order of orders) {
      const n = intentNumberOf(order);
      const intent = n === null ? undefined : list[n];
      if (!intent) {
        orphans += 1;
        problem(`${account}: order ${order.id} maps to no intent`);
        continue;
      }
      if (!byIntent.has(intent)) byIntent.set(intent, []);
      byIntent.get(intent).push(order);
      byKey.set(order.idempotencyKey, (byKey.get(order.idempotencyKey) ?? 0) + 1);
    }
    for (const [key, count] of byKey) if (count > 1) problem(`${account}: ${count} orders with key ${key}`);
    for (const intent of list) {
      if (!intent) continue;
      const got = byIntent.get(intent) ?? [];
      const keys = new Set(got.map((o) => o.idempotencyKey));
      if (got.length > 1) {
        duplicates += got.length - 1;
        problem(`${intent.id}: ${got.length} orders (keys ${[...keys].join(", ")})`);
      }
      for (const o of got) {
        if (o.idempotencyKey !== intent.key) problem(`${intent.id}: order ${o.id} under key ${o.idempotencyKey}, intent key ${intent.key}`);
      }
      if (intent.outcome === "succeeded") {
        if (got.length === 0) {
          lost += 1;
          problem(`${intent.id}: succeeded in the client but the server has no order`);
        }
        for (const id of intent.orderIds) {
          if (!got.some((o) => o.id === id)) problem(`${intent.id}: the client's answer named order ${id}, not on the server`);
        }
      } else if (final) {
        lost += 1;
        problem(`${intent.id}: still ${intent.outcome} (${intent.pendingCode}) after the resume phase`);
      }
    }
  }
  return { duplicates, lost, orphans };
}

/**
 * After the resume phase (every fault off): waits for the outbox to drain (every order's confirmation
 * delivered), then counts every effect per order: exactly one charge at the provider (the one the order
 * names) and exactly one confirmation at the receiver for every order, and nothing naming no order.
 */
export async function countEffects(server, intents, downstream) {
  const accounts = [...new Set(intents.map((i) => i.account))];
  const drainStart = Date.now();
  let orders = [];
  for (;;) {
    orders = (await Promise.all(accounts.map((a) => ordersOf(server, a)))).flat();
    const waiting = orders.filter((o) => !o.confirmation?.deliveredAt);
    if (!waiting.length) break;
    if (Date.now() - drainStart > 60_000) {
      problem(`the outbox did not drain in 60 s: ${waiting.length} confirmations undelivered (${waiting.slice(0, 3).map((o) => o.id).join(", ")})`);
      break;
    }
    await sleep(250);
  }
  figures.crashes.drainSeconds = Number(((Date.now() - drainStart) / 1000).toFixed(1));
  const charges = (await downstream.provider.get("/charges")).charges;
  const mail = await downstream.mailbox.get("/messages");
  figures.crashes.charges = charges.length;
  figures.crashes.confirmations = mail.messages.length;
  figures.crashes.refusedDuplicates = mail.duplicatesRefused;
  const byId = new Map(orders.map((o) => [o.id, o]));
  const chargesOf = new Map();
  for (const charge of charges) {
    if (!byId.has(charge.reference)) { figures.checks.orphanEffects += 1; problem(`charge ${charge.id} names no order of this run (${charge.reference})`); continue; }
    chargesOf.set(charge.reference, [...(chargesOf.get(charge.reference) ?? []), charge]);
  }
  const messagesOf = new Map();
  for (const message of mail.messages) {
    const order = [...byId.keys()].find((id) => message.subject.includes(id));
    if (!order) { figures.checks.orphanEffects += 1; problem(`confirmation ${message.id} names no order of this run`); continue; }
    messagesOf.set(order, [...(messagesOf.get(order) ?? []), message]);
  }
  for (const order of orders) {
    const got = chargesOf.get(order.id) ?? [];
    if (got.length > 1) { figures.checks.duplicateCharges += got.length - 1; problem(`order ${order.id}: ${got.length} charges`); }
    if (got.length === 0) { figures.checks.missingCharges += 1; problem(`order ${order.id}: no charge at the provider`); }
    if (got.length && order.chargeId !== got[0].id) problem(`order ${order.id} names charge ${order.chargeId}, the provider has ${got[0].id}`);
    const sent = messagesOf.get(order.id) ?? [];
    if (sent.length > 1) { figures.checks.duplicateConfirmations += sent.length - 1; problem(`order ${order.id}: ${sent.length} confirmations`); }
    if (sent.length === 0) { figures.checks.missingConfirmations += 1; problem(`order ${order.id}: no confirmation at the receiver`); }
    if (sent.length && sent[0].id !== order.confirmation?.id) problem(`order ${order.id} names confirmation ${order.confirmation?.id}, the receiver has ${sent[0].id}`);
  }
  // Every intent that succeeded has its one order; the per-order counts above cover its effects.
  for (const intent of intents) if (intent.outcome === "succeeded" && ![...byId.values()].some((o) => o.idempotencyKey === intent.key && o.accountId === intent.account)) problem(`${intent.id}: succeeded but no order to count effects of`);
}
