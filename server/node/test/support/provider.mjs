// A payment provider on 127.0.0.1 that honours idempotency keys, as a real one does: the first charge with a
// key is made, each later call with that key gets the same charge back. It counts the calls per key, so a
// test sees how many charges were made (one per key) and how often each was asked for. `onCharge(key)`, when
// set, runs after a new charge is made and before it is answered (a test kills its caller there); `delayMs`
// holds every new charge's answer; while `outages` is above 0, a call is answered 503 (nothing charged) and
// counts it down.
import http from "node:http";

export async function startProvider() {
  const charges = new Map();
  const provider = { charges, onCharge: undefined, delayMs: 0, outages: 0, url: "", close: () => new Promise((r) => server.close(r)) };
  const server = http.createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8").on("data", (c) => (body += c));
    req.on("end", async () => {
      const key = req.headers["idempotency-key"];
      if (req.method !== "POST" || req.url !== "/charges" || typeof key !== "string") {
        res.writeHead(400).end();
        return;
      }
      if (provider.outages > 0) {
        provider.outages -= 1;
        res.writeHead(503).end();
        return;
      }
      const seen = charges.get(key);
      if (seen !== undefined) {
        seen.calls += 1;
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ id: seen.id, amount: seen.amount }));
        return;
      }
      const charge = { id: `ch_${charges.size + 1}`, amount: JSON.parse(body).amount, calls: 1 };
      charges.set(key, charge);
      await provider.onCharge?.(key);
      if (provider.delayMs > 0) await new Promise((r) => setTimeout(r, provider.delayMs));
      res.writeHead(201, { "content-type": "application/json" }).end(JSON.stringify({ id: charge.id, amount: charge.amount }));
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  provider.url = `http://127.0.0.1:${server.address().port}`;
  return provider;
}
