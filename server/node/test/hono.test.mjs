// Hono 4 on @hono/node-server: the middleware protects the route after it, and the key-status handlers,
// pass the HTTP suite (support/http-suite.mjs).
import { serve } from "@hono/node-server";
import { Hono } from "hono";
import { idempotency, keyStatusHandlers } from "idempotent-endpoint/hono";

import { httpSuite } from "./support/http-suite.mjs";

httpSuite("Hono 4 middleware", async (endpoint) => {
  const app = new Hono();
  app.post("/api/orders", idempotency(endpoint, { maxBodyBytes: 1024 }), async (c) => {
    const { tx, json } = c.get("idempotency");
    const { rows } = await tx.query("INSERT INTO orders (sku) VALUES ($1) RETURNING id", [json.sku]);
    return c.json({ id: rows[0].id, sku: json.sku }, 201);
  });
  const status = keyStatusHandlers(endpoint);
  app.get("/api/idempotency-keys/:key", status.get).post(status.post);

  let server;
  await new Promise((resolve) => (server = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, resolve)));
  return {
    base: `http://127.0.0.1:${server.address().port}`,
    close: async () => {
      server.closeAllConnections?.();
      await new Promise((r) => server.close(r));
    },
  };
});
