// Express 5: a route handler that protects one endpoint, and the key-status routes.
import type { Request, RequestHandler, Response, Router } from "express";

import type { HandlerAnswer, IdempotentEndpoint } from "./endpoint.js";
import { type BodyLimits, handleKeyed, type HandlerContext, sendAnswer } from "./http.js";

/** Options of {@link idempotent}. */
export interface ExpressOptions extends BodyLimits {
  /** The scope of the request's key (its account); the endpoint's scope when absent or undefined. */
  scope?: (req: Request) => string | undefined;
}

/**
 * Protects one Express 5 route: the key row in the handler's transaction, replays, 409/422/410, and bad
 * input refused with a problem answer before anything is stored. Put no body parser before it (it reads
 * the raw body: the fingerprint is over its bytes); the handler gets the parsed JSON.
 *
 * ```ts
 * app.post("/api/orders", idempotent(endpoint, async ({ json, tx }) => {
 *   const { rows } = await tx.query("INSERT INTO orders (body) VALUES ($1) RETURNING id", [json]);
 *   return { status: 201, body: { id: rows[0].id } };
 * }));
 * ```
 *
 * A handler that throws rolls back its rows and the key row; the error goes to `next` (Express answers 500).
 */
export function idempotent<Tx>(
  endpoint: IdempotentEndpoint<Tx>,
  handler: (context: HandlerContext<Tx> & { req: Request }) => Promise<HandlerAnswer>,
  options: ExpressOptions = {},
): RequestHandler {
  return async (req: Request, res: Response) => {
    const { scope: scopeOf, ...limits } = options;
    const scope = scopeOf?.(req);
    const result = await handleKeyed(endpoint, req, (context) => handler({ ...context, req }), { ...limits, ...(scope === undefined ? {} : { scope }) });
    sendAnswer(res, result.answer);
  };
}

/**
 * The key-status routes on `router` at `path` (default `/idempotency-keys/:key`): GET answers what the
 * server knows of a key, POST settles it (the fence); the contract in server/README.md, "Key status".
 */
export function keyStatusRoutes<Tx>(
  router: Router,
  endpoint: IdempotentEndpoint<Tx>,
  options: { path?: string; scope?: (req: Request) => string | undefined } = {},
): void {
  const path = options.path ?? "/idempotency-keys/:key";
  const key = (req: Request): string => String(req.params["key"] ?? "");
  router.get(path, async (req, res) => sendAnswer(res, await endpoint.status(key(req), options.scope?.(req))));
  router.post(path, async (req, res) => sendAnswer(res, await endpoint.settle(key(req), options.scope?.(req))));
}
