import { idempotentRoute } from "idempotent-endpoint/next";

import { checkoutEndpoint } from "@/lib/endpoint";

export const POST = idempotentRoute(checkoutEndpoint, async (_request, { tx, json }) => {
  const { sku } = (json ?? {}) as { sku?: unknown };
  // A refusal is an answer too: stored with the key and replayed, like the order.
  if (typeof sku !== "string") return { status: 400, body: { title: "an order needs a sku" } };
  const { rows } = await tx.query("INSERT INTO orders (sku) VALUES ($1) RETURNING id", [sku]);
  return { status: 201, body: { id: rows[0].id, sku } };               // a Response works too
});

// How many orders there are (the test counts them).
export async function GET() {
  const { rows } = await (await checkoutEndpoint()).store.query("SELECT count(*)::int AS count FROM orders");
  return Response.json(rows[0]);
}
