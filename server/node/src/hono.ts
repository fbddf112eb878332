// Hono 4: a middleware that protects the route after it. The route's handler reads the open transaction and
// the parsed body from the context (`c.get("idempotency")`) and answers as usual; the middleware stores
// that answer on the key row in the same transaction and sends it (or the replay, 409, 422, 410).
import type { MiddlewareHandler } from "hono";
import { createMiddleware } from "hono/factory";

import { encode, type HandlerAnswer, type IdempotentEndpoint } from "./endpoint.js";
import { answerOf, runWeb, toResponse, type WebContext, type WebOptions } from "./web.js";

/** What the protected handler finds at `c.get("idempotency")`. */
export interface HonoIdempotency<Tx> extends WebContext<Tx> {
  /**
   * The `Response` of a plain answer (the status, a JSON value or text as the body, headers), for the
   * handler to return: `return answer({ status: 201, body: { id } })`. The middleware stores it without
   * reading the `Response`'s body back, which `c.json(...)` needs (the platform builds a stream for it);
   * headers a later middleware sets on it are stored too.
   */
  answer(answer: HandlerAnswer): Response;
}

/** What the protected handler finds at `c.get("idempotency")`. */
export interface IdempotencyVariables<Tx> {
  /** The open transaction, the body as JSON, the key, and `answer`. */
  idempotency: HonoIdempotency<Tx>;
}

/**
 * The body text of each `Response` that `answer` made. A `Response`'s body cannot change, so while it is
 * the one the route ends with, this is its body; one replaced on the way out is not in here and is read.
 */
const bodies = new WeakMap<Response, string>();

/** The `Response` of a plain answer, its body kept in `bodies` ({@link HonoIdempotency.answer}). */
function answer(plain: HandlerAnswer): Response {
  const encoded = encode(plain);
  const response = toResponse(encoded);
  bodies.set(response, encoded.body);
  return response;
}

/** The Hono environment of a protected route. */
export interface IdempotencyEnv<Tx> {
  /** `c.get("idempotency")`. */
  Variables: IdempotencyVariables<Tx>;
}

/** Options of {@link idempotency}. */
export type HonoOptions = WebOptions;

/**
 * The middleware: the key (400 before the body is read), the body within the limits and as JSON (else a
 * problem answer, nothing stored), then the route's handler inside the key row's transaction.
 *
 * ```ts
 * app.post("/api/orders", idempotency(endpoint), async (c) => {
 *   const { tx, json, answer } = c.get("idempotency");
 *   const { rows } = await tx.query("INSERT INTO orders (sku) VALUES ($1) RETURNING id", [json.sku]);
 *   return answer({ status: 201, body: { id: rows[0].id } });
 * });
 * ```
 *
 * `return c.json({ id: rows[0].id }, 201)` answers the same, with the `Response`'s body read back before it
 * is stored ({@link HonoIdempotency.answer}).
 *
 * A handler that throws rolls back its rows and the key row; the error goes to Hono's error handler.
 */
export function idempotency<Tx>(endpoint: IdempotentEndpoint<Tx>, options: HonoOptions = {}): MiddlewareHandler<IdempotencyEnv<Tx>> {
  return createMiddleware<IdempotencyEnv<Tx>>(async (c, next) => {
    const response = await runWeb(
      endpoint,
      c.req.raw,
      async (context) => {
        c.set("idempotency", { ...context, answer });
        await next();
        if (c.error !== undefined) throw c.error;
        const body = bodies.get(c.res);
        return body === undefined ? c.res : answerOf(c.res, body);
      },
      options,
    );
    c.res = undefined;
    c.res = response;
  });
}

/**
 * The key-status handlers for a route with a `:key` parameter: `get` answers what the server knows of a key,
 * `post` settles it (the fence); the contract in server/README.md, "Key status".
 */
export function keyStatusHandlers<Tx>(endpoint: IdempotentEndpoint<Tx>, options: { scope?: (headers: Headers) => string | undefined } = {}) {
  const key = (c: { req: { param(name: string): string | undefined } }): string => c.req.param("key") ?? "";
  return {
    /** GET: the key's status. */
    get: createMiddleware(async (c) => {
      c.res = toResponse(await endpoint.status(key(c), options.scope?.(c.req.raw.headers)));
    }),
    /** POST: settle the key. */
    post: createMiddleware(async (c) => {
      c.res = toResponse(await endpoint.settle(key(c), options.scope?.(c.req.raw.headers)));
    }),
  };
}
