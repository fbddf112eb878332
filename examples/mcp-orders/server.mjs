// An MCP server (stdio) with one state-changing tool, place_order, that places an order on the
// reference server exactly once per intent, and order_status, which asks the server about a key.
//
// The key: the agent may pass `idempotencyKey` (MCP has no standard field for it, so the tool takes
// it as an argument); without it the key is derived from the run id and the canonical arguments,
// never from the model's tool-call id (re-minted on every turn). Intents and keys are kept in a folder
// (idempotent-fetch-client/file), so a call this process could not finish resumes with the same key after a
// restart. Configuration (environment): IF_API the server's origin, IF_TOKEN its bearer token,
// IF_STATE_DIR the folder, IF_RUN_ID the agent run this process serves, IF_MAX_ATTEMPTS (default 8).
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
// One intent per key: order_status finds it from the key alone.
const intentOf = (key) => `place_order:${key}`;
const text = (value, isError = false) => ({ content: [{ type: "text", text: JSON.stringify(value) }], structuredContent: value, isError });

const server = new McpServer({ name: "orders", version: "1.0.0" });

server.registerTool(
  "place_order",
  {
    description: "Places an order once. Retrying with the same arguments (and idempotencyKey) never places a second one.",
    inputSchema: {
      items: z.array(z.object({ sku: z.string(), qty: z.number().int().positive() })).min(1),
      idempotencyKey: z.string().optional().describe("16 to 255 of A-Z a-z 0-9 - . _ ~; omit it to derive one from the run and the arguments"),
    },
  },
  async ({ items, idempotencyKey }) => {
    const key = idempotencyKey ?? toolCallKey(runId, "place_order", { items });
    try {
      const op = await client.begin(intentOf(key), { url: `${api}/api/orders`, method: "POST", headers, body: JSON.stringify({ items }) }, { key });
      const { ok, status, replayed, response } = await op.send();
      const body = await response.json().catch(() => null);
      return text({ ok, status, replayed, key, orderId: body?.id ?? null }, !ok);
    } catch (error) {
      if (!isIdempotentFetchError(error)) throw error;
      // RETRIES_EXHAUSTED: the key is kept; the same call again resumes it.
      return text({ ok: false, code: error.code, key, message: error.message }, true);
    }
  },
);

server.registerTool(
  "order_status",
  {
    description: "What the server did with a place_order key: done (with the order), in_flight or unknown.",
    inputSchema: { idempotencyKey: z.string() },
  },
  async ({ idempotencyKey }) => {
    try {
      const answer = await client.reconcile(intentOf(idempotencyKey), { headers: { authorization: headers.authorization } });
      if (answer.status !== "done") return text({ status: answer.status, key: idempotencyKey });
      const body = await answer.result.response.json().catch(() => null);
      return text({ status: "done", httpStatus: answer.result.status, key: idempotencyKey, orderId: body?.id ?? null });
    } catch (error) {
      if (isIdempotentFetchError(error) && error.code === "NOT_FOUND") return text({ status: "unknown", key: idempotencyKey, message: "no call with this key here" });
      throw error;
    }
  },
);

await server.connect(new StdioServerTransport());
