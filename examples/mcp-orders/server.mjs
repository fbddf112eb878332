// An MCP server (stdio) with one state-changing tool, place_order, that places an order on the
// reference server exactly once per intent, and order_status, which asks the server about a key.
//
// The key: the agent may pass `idempotencyKey` (MCP has no standard field for it, so the tool takes
// it as an argument); without it the key is derived from the run id and the canonical arguments,
// never from the model's tool-call id (re-minted on every turn). Intents and keys are kept in a folder
// (idempotent-fetch-client/file), so a call this process could not finish resumes with the same key after a
// restart. Configuration (environment): IF_API the server's origin, IF_TOKEN its bearer token,
// IF_STATE_DIR the folder, IF_RUN_ID the agent run this process serves, IF_MAX_ATTEMPTS (default 8).
//
// Every result carries `message`: what is known and what the caller can do next, in words a model
// acts on. A model reads "unknown" or "failed" as "nothing happened" and re-plans, often with other
// arguments (a new key: a second order), so a result never says less than what is known: when no
// answer came back, the order may have been placed, and the same call again is how to learn it.
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";
import { IdempotentClient, isIdempotentFetchError } from "idempotent-fetch-client";
import { toolCallKey } from "idempotent-fetch-client/agent";
import { fileStorage } from "idempotent-fetch-client/file";

const { IF_API: api, IF_TOKEN: token, IF_STATE_DIR: directory, IF_RUN_ID: runId = "run-local" } = process.env;
if (!api || !token || !directory) throw new Error("set IF_API, IF_TOKEN and IF_STATE_DIR");

const client = new IdempotentClient({
  namespace: "mcp-orders",
  storage: fileStorage({ directory }),
  statusUrl: `${api}/api/idempotency-keys/{key}`,
  retry: { baseDelayMs: 50, maxDelayMs: 500, maxAttempts: Number(process.env.IF_MAX_ATTEMPTS ?? 8) },
});
const headers = { authorization: `Bearer ${token}`, "content-type": "application/json" };
const credentials = { headers: { authorization: headers.authorization } };
// One intent per key: order_status finds it from the key alone.
const intentOf = (key) => `place_order:${key}`;
const result = (value, isError = false) => ({ content: [{ type: "text", text: JSON.stringify(value) }], structuredContent: value, isError });
const itemsText = (items) => items.map(({ sku, qty }) => `${qty} x ${sku}`).join(", ");
const readJson = (response) => response.json().catch(() => null);
const attemptsText = (n) => `${n} attempt${n === 1 ? "" : "s"}`;

/** The advice when no definite answer came back: the only call that learns the outcome without
 *  risking a second order is the same one. */
const mayHaveBeenPlaced = (key, why) =>
  `${why}: the order may have been placed. Call place_order again with the same arguments and idempotencyKey "${key}" to get its result (it never places a second order), or order_status with that key; do not change the arguments or the key, which would place a second order.`;

/** What the server holds for a key, for a caller that reused it with other arguments. */
async function earlierOrder(key) {
  const answer = await client.reconcile(intentOf(key), credentials).catch(() => null);
  if (answer?.status !== "done") return "";
  const body = await readJson(answer.result.response);
  return body?.id ? ` (order ${body.id}: ${itemsText(body.items ?? [])})` : "";
}

/** A place_order error from the client, as a result the agent can act on. */
async function placeOrderError(error, key, items) {
  const base = { ok: false, code: error.code, key, detail: error.message };
  switch (error.code) {
    case "RETRIES_EXHAUSTED":
    case "KEY_STATUS":
    case "ABORTED": {
      const last = error.lastStatus ? `the server last answered HTTP ${error.lastStatus}` : "every answer was lost";
      return { ...base, orderPlaced: "maybe", message: mayHaveBeenPlaced(key, `No definite answer after ${attemptsText(error.attempts)} (${last})`) };
    }
    case "EXPIRED":
      return {
        ...base,
        orderPlaced: "maybe",
        message: `The call with idempotencyKey "${key}" is older than the orders server keeps keys, so it is not sent again: the order may have been placed. Ask the user or check the account's orders before placing ${itemsText(items)} under another key.`,
      };
    case "INTENT_MISMATCH":
    case "KEY_MISMATCH":
      return {
        ...base,
        orderPlaced: "not by this call",
        message: `idempotencyKey "${key}" was already used by an earlier place_order call with other arguments${await earlierOrder(key)}; no order was placed for ${itemsText(items)}. To get the earlier call's result, call order_status with that key. To place this order as a new one, call place_order again without idempotencyKey (or with a new one).`,
      };
    default:
      // Refused before anything was sent (a malformed key, the folder unusable…), or after attempts.
      if (error.attempts > 0) return { ...base, orderPlaced: "maybe", message: mayHaveBeenPlaced(key, `Stopped (${error.code}) after ${attemptsText(error.attempts)}`) };
      return { ...base, orderPlaced: "no", message: `Not sent, no order placed: ${error.message}.` };
  }
}

const server = new McpServer({ name: "orders", version: "1.0.0" });

server.registerTool(
  "place_order",
  {
    description:
      "Places an order once. Calling again with the same arguments (and idempotencyKey) never places a second one: it returns the first call's result. When a result says the order may have been placed, call again with the same arguments; never change them to retry.",
    inputSchema: {
      items: z.array(z.object({ sku: z.string(), qty: z.number().int().positive() })).min(1),
      idempotencyKey: z.string().optional().describe("16 to 255 of A-Z a-z 0-9 - . _ ~; omit it to derive one from the run and the arguments"),
    },
  },
  async ({ items, idempotencyKey }) => {
    const key = idempotencyKey ?? toolCallKey(runId, "place_order", { items });
    try {
      const op = await client.begin(intentOf(key), { url: `${api}/api/orders`, method: "POST", headers, body: JSON.stringify({ items }) }, { key });
      const { ok, status, replayed, uncertain, response } = await op.send();
      const body = await readJson(response);
      const orderId = body?.id ?? null;
      if (ok) {
        const message = replayed
          ? `Order ${orderId} was already placed by an earlier call with idempotencyKey "${key}"; this is its result. No second order was placed.`
          : `Order ${orderId} placed.`;
        return result({ ok, status, replayed, key, orderId, orderPlaced: "yes", message });
      }
      // A refusal after an attempt that may have reached the server proves nothing about that attempt.
      if (uncertain) {
        return result({ ok, status, replayed, key, orderId, orderPlaced: "maybe", message: mayHaveBeenPlaced(key, `The server refused a later attempt (HTTP ${status}) after an earlier one may have reached it`) }, true);
      }
      const why = body?.detail ?? body?.title ?? `HTTP ${status}`;
      return result({ ok, status, replayed, key, orderId, orderPlaced: "no", message: `The orders server refused the order (HTTP ${status}: ${why}); no order was placed. Change the arguments and call place_order again without idempotencyKey (or with a new one).` }, true);
    } catch (error) {
      if (!isIdempotentFetchError(error)) throw error;
      return result(await placeOrderError(error, key, items), true);
    }
  },
);

server.registerTool(
  "order_status",
  {
    description: "What the orders server did with a place_order key: done (with the order), in_flight (ask again), or no_record (no order with this key so far).",
    inputSchema: { idempotencyKey: z.string() },
  },
  async ({ idempotencyKey: key }) => {
    try {
      const answer = await client.reconcile(intentOf(key), credentials);
      if (answer.status === "in_flight") {
        return result({ status: "in_flight", key, message: `The orders server is still working on idempotencyKey "${key}". Call order_status again shortly; do not place the order under another key meanwhile.` });
      }
      if (answer.status === "unknown") {
        return result({
          status: "no_record",
          key,
          message: `The orders server has no order with idempotencyKey "${key}" so far. To place it exactly once, call place_order again with the same arguments and this key (a request still on its way cannot then make a second order).`,
        });
      }
      const body = await readJson(answer.result.response);
      const orderId = body?.id ?? null;
      const message = answer.result.ok
        ? `Order ${orderId} was placed with idempotencyKey "${key}".`
        : `The orders server refused the call with idempotencyKey "${key}" (HTTP ${answer.result.status}); no order was placed with it.`;
      return result({ status: "done", httpStatus: answer.result.status, key, orderId, message });
    } catch (error) {
      if (!isIdempotentFetchError(error)) throw error;
      if (error.code === "NOT_FOUND") {
        return result({ status: "not_found", key, message: `This server made no place_order call with idempotencyKey "${key}" (check the key; it is the one a place_order result names).` }, true);
      }
      return result({ status: "not_asked", key, detail: error.message, message: `The orders server could not be asked (${error.code}): the order may have been placed. Call order_status again later, or place_order with the same arguments and idempotencyKey "${key}".` }, true);
    }
  },
);

await server.connect(new StdioServerTransport());
