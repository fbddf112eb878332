// Fastify 5 with the plugin: routes marked `idempotent: true` and the key-status routes pass the HTTP suite
// (support/http-suite.mjs).
import Fastify from "fastify";
import { idempotentPlugin, keyStatusRoutes } from "idempotent-endpoint/fastify";

import { httpSuite } from "./support/http-suite.mjs";

httpSuite("Fastify 5 plugin", async (endpoint) => {
  const app = Fastify();
  await app.register(idempotentPlugin, { endpoint, maxBodyBytes: 1024 });
  app.post("/api/orders", { config: { idempotent: true } }, async (request, reply) => {
    const { tx, json } = request.idempotency;
    const { rows } = await tx.query("INSERT INTO orders (sku) VALUES ($1) RETURNING id", [json.sku]);
    return reply.code(201).send({ id: rows[0].id, sku: json.sku });
  });
  keyStatusRoutes(app, endpoint, { path: "/api/idempotency-keys/:key" });

  const base = await app.listen({ port: 0, host: "127.0.0.1" });
  return { base, close: () => app.close() };
});
