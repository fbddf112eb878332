// The Node share of the intents: the package's clients with aborts, re-begins, double sends, raw twins and
// client.fetch.
import { NODE_CONCURRENCY, chance, between, sleep, P_TWIN, P_DOUBLE, P_ABORT, P_FETCH } from "./options.mjs";
import { figures, progress, problem, bump } from "./report.mjs";
import { seeKey, record } from "./intents.mjs";

export async function runNode(lib, intents, proxyUrl, serverUrl) {
  const clients = new Map();
  const clientFor = (intent) => {
    const id = `${intent.ns}|${intent.retry.maxAttempts}`;
    if (!clients.has(id)) {
      // Asks the server about keys it would give up on (the key-status endpoint, through the proxy).
      const client = new lib.IdempotentClient({
        namespace: intent.ns, storage: "memory", retry: intent.retry, retryBudget: 100000,
        statusUrl: `${proxyUrl}/api/idempotency-keys/{key}`,
      });
      client.addEventListener("reconcile", () => (figures.node.reconciled += 1));
      clients.set(id, client);
    }
    return clients.get(id);
  };
  const request = (intent) => ({
    url: `${proxyUrl}/api/orders`, method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${intent.token}` }, body: intent.body,
  });
  const queue = [...intents];
  // client.fetch with the intent's id: begin and send in one call. The key comes from the first
  // "attempt" event (the record is stored by then, before the request goes) or from the error.
  async function viaFetch(intent) {
    figures.node.viaFetch += 1;
    const client = clientFor(intent);
    const onAttempt = (e) => e.intentId === intent.id && seeKey(intent, e.key, "fetch attempt");
    const onRetry = (e) => e.intentId === intent.id && bump(figures.node.retryReasons, e.reason.replace(/\d+ ?ms/g, "").trim());
    client.addEventListener("attempt", onAttempt);
    client.addEventListener("retry", onRetry);
    try {
      const { url, ...init } = request(intent);
      const response = await client.fetch(url, { ...init, intent: intent.id });
      return { result: { key: intent.key, ok: response.ok, status: response.status, response } };
    } catch (error) {
      return { error };
    } finally {
      client.removeEventListener("attempt", onAttempt);
      client.removeEventListener("retry", onRetry);
    }
  }
  async function one(intent) {
    if (chance(P_FETCH)) {
      await record(intent, await viaFetch(intent));
      return;
    }
    const client = clientFor(intent);
    const op = await client.begin(intent.id, request(intent));
    seeKey(intent, op.key, "begin");
    const reasons = [];
    const onRetry = (e) => { reasons.push(e.reason); bump(figures.node.retryReasons, e.reason.replace(/\d+ ?ms/g, "").trim()); };
    let twin;
    if (chance(P_TWIN)) {
      // Another sender with the same key at the same moment (a second device whose storage was
      // copied): held in flight by the server for 1.2 s, so the library's attempts get 409.
      figures.node.twins += 1;
      twin = fetch(`${serverUrl}/api/orders`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${intent.token}`, "idempotency-key": op.key, "x-fault": "latency=1200" },
        body: intent.body,
      }).then(async (r) => { if (r.status === 409) figures.node.twin409 += 1; await r.arrayBuffer(); }, () => {});
      await sleep(between(0, 20));
    }
    const settle = (promise) => promise.then((result) => ({ result }), (error) => ({ error }));
    let outcome;
    if (chance(P_ABORT)) {
      figures.node.aborts += 1;
      const controller = new AbortController();
      setTimeout(() => controller.abort(), between(0, 400));
      outcome = await settle(op.send({ signal: controller.signal, onRetry }));
      if (outcome.error?.code === "ABORTED") {
        // the "reload": the page's client is gone mid-retry; the intent is begun again
        figures.node.reBegins += 1;
        const again = await client.begin(intent.id, request(intent));
        seeKey(intent, again.key, "re-begin");
        if (!again.resumed) problem(`${intent.id}: re-begin after abort not marked resumed`);
        outcome = await settle(again.send({ onRetry }));
      }
    } else if (chance(P_DOUBLE)) {
      figures.node.doubleSends += 1;
      const [a, b] = await Promise.all([settle(op.send({ onRetry })), settle(op.send({ onRetry }))]);
      if (a.result && b.result && a.result.key !== b.result.key) problem(`${intent.id}: double send, two keys`);
      outcome = a.result ? a : b;
      if (b.result) seeKey(intent, b.result.key, "double send");
    } else {
      outcome = await settle(op.send({ onRetry }));
    }
    await twin;
    await record(intent, outcome);
  }
  async function worker() {
    for (;;) {
      const intent = queue.shift();
      if (!intent) return;
      progress.nodeActive.add(intent.id);
      try {
        await one(intent);
      } catch (error) {
        problem(`${intent.id}: harness error ${error?.stack ?? error}`);
      }
      progress.nodeActive.delete(intent.id);
      progress.nodeDone += 1;
    }
  }
  await Promise.all(Array.from({ length: NODE_CONCURRENCY }, worker));
  return { clientFor, request };
}
