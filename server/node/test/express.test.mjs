// Express 5 with the middleware: the README's route and key-status routes pass the HTTP suite
// (support/http-suite.mjs).
import express from "express";
import { idempotent, keyStatusRoutes } from "idempotent-endpoint";

import { httpSuite } from "./support/http-suite.mjs";

httpSuite("Express 5 middleware", async (endpoint) => {
  const app = express();
  app.post("/api/orders", idempotent(endpoint, async ({ json, tx }) => {
    const { rows } = await tx.query("INSERT INTO orders (sku) VALUES ($1) RETURNING id", [json.sku]);
    return { status: 201, body: { id: rows[0].id, sku: json.sku } };
  }, { maxBodyBytes: 1024 }));
  keyStatusRoutes(app, endpoint, { path: "/api/idempotency-keys/:key" });

  let server;
  await new Promise((resolve) => (server = app.listen(0, "127.0.0.1", resolve)));
  return {
    base: `http://127.0.0.1:${server.address().port}`,
    close: async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
});
