// `npx idempotent-endpoint dev`: a protected example endpoint on PGlite (a folder on disk), to point the
// browser package at. POST /api/orders creates an order in the same transaction as its key row.
import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

import { PGlite, type Transaction } from "@electric-sql/pglite";

import * as core from "./core.js";
import { idempotentEndpoint } from "./endpoint.js";
import { handleKeyed, internalAnswer, sendAnswer } from "./http.js";

/** Options of {@link startDevServer}. */
export interface DevOptions {
  /** The port on 127.0.0.1; 0 picks a free one. @defaultValue 8787 */
  port?: number;
  /** The PGlite data folder; `memory://` keeps nothing. @defaultValue `.idempotent-endpoint-dev` in the working directory */
  dataDir?: string;
  /** How long an order's work takes inside its transaction, in milliseconds (so concurrent retries overlap it). @defaultValue 150 */
  workMs?: number;
  /** The share of order requests answered 503 before any work (0 to 1). @defaultValue 0 */
  failShare?: number;
  /** The share of done orders whose answer is lost: committed, then the connection is cut (0 to 1). @defaultValue 0 */
  loseShare?: number;
}

/** A running dev server. */
export interface DevServer {
  /** The endpoint's URL, e.g. `http://127.0.0.1:8787/api/orders`. */
  url: string;
  /** The key-status URL template (`{key}` where the key goes). */
  keyStatusUrl: string;
  /** Stops the server and closes the database. */
  close(): Promise<void>;
}

const ORDERS = `CREATE TABLE IF NOT EXISTS orders (
  id TEXT PRIMARY KEY, idempotency_key TEXT NOT NULL, body TEXT NOT NULL, created_at BIGINT NOT NULL)`;
const KEY_STATUS = /^\/api\/idempotency-keys\/([^/]+)$/;

/** Cross-origin answers, so a page on another origin (a Vite dev server) can call the endpoint. */
function cors(req: IncomingMessage, res: ServerResponse): void {
  const origin = req.headers.origin;
  if (origin === undefined) return;
  res.setHeader("access-control-allow-origin", origin);
  res.setHeader("vary", "origin");
  res.setHeader("access-control-allow-methods", "GET, POST");
  res.setHeader("access-control-allow-headers", `content-type, ${core.IDEMPOTENCY_KEY_HEADER}`);
  res.setHeader("access-control-expose-headers", `${core.REPLAYED_HEADER}, retry-after`);
}

/** Starts the dev server; resolves once it listens. */
export async function startDevServer(options: DevOptions = {}): Promise<DevServer> {
  const db = new PGlite(options.dataDir ?? ".idempotent-endpoint-dev");
  await db.exec(ORDERS);
  const endpoint = idempotentEndpoint({ database: db });
  await endpoint.install();
  // The retention sweep, hourly (the timer does not keep the process alive).
  const sweeper = setInterval(() => void endpoint.sweep().catch((e: unknown) => console.error("idempotent-endpoint dev: sweep:", e)), 60 * 60 * 1000);
  sweeper.unref();
  const workMs = options.workMs ?? 150;
  const failShare = options.failShare ?? 0;
  const loseShare = options.loseShare ?? 0;

  const order = async ({ json, tx, key }: { json: unknown; tx: Transaction; key: string }) => {
    if (json === null || typeof json !== "object" || Array.isArray(json)) {
      const { status, headers, body } = core.customProblem(400, "invalid-order", "Invalid order", "An order is a JSON object.");
      return { status, headers: Object.fromEntries(headers), body };
    }
    const id = `ord_${randomUUID().replaceAll("-", "").slice(0, 16)}`;
    const createdAt = Math.floor(Date.now() / 1000);
    await tx.query("INSERT INTO orders (id, idempotency_key, body, created_at) VALUES ($1, $2, $3, $4)", [id, key, JSON.stringify(json), createdAt]);
    await new Promise((r) => setTimeout(r, workMs));
    return { status: 201, body: { id, idempotencyKey: key, order: json, createdAt } };
  };

  const server = createServer((req, res) => {
    cors(req, res);
    const path = new URL(req.url ?? "/", "http://localhost").pathname;
    const status = KEY_STATUS.exec(path);
    const route = async (): Promise<void> => {
      if (req.method === "OPTIONS") {
        res.statusCode = 204;
        res.end();
      } else if (path === "/api/orders" && req.method === "POST") {
        if (Math.random() < failShare) {
          sendAnswer(res, core.customProblem(503, "fault", "Injected fault", "A fault the dev server injected (--faults); nothing was done.", 1));
          return;
        }
        const result = await handleKeyed(endpoint, req, order);
        if (result.outcome === "fresh" && Math.random() < loseShare) {
          req.socket.destroy();
          return;
        }
        sendAnswer(res, result.answer);
      } else if (path === "/api/orders" && req.method === "GET") {
        const { rows } = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM orders");
        res.setHeader("content-type", "application/json");
        res.end(JSON.stringify({ count: rows[0]?.n ?? 0 }));
      } else if (status?.[1] !== undefined && (req.method === "GET" || req.method === "POST")) {
        const raw = decodeURIComponent(status[1]);
        sendAnswer(res, req.method === "GET" ? await endpoint.status(raw) : await endpoint.settle(raw));
      } else {
        sendAnswer(res, core.customProblem(404, "not-found", "Not found", `No route ${req.method} ${path}.`));
      }
    };
    route().catch((error: unknown) => {
      console.error("idempotent-endpoint dev:", error);
      if (!res.headersSent) sendAnswer(res, internalAnswer());
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 8787, "127.0.0.1", resolve);
  });
  const { port } = server.address() as AddressInfo;
  const base = `http://127.0.0.1:${port}`;
  return {
    url: `${base}/api/orders`,
    keyStatusUrl: `${base}/api/idempotency-keys/{key}`,
    async close() {
      clearInterval(sweeper);
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await db.close();
    },
  };
}
