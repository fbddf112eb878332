// Hono 4: a middleware that protects the route after it. The route's handler reads the open transaction and
// the parsed body from the context (`c.get("idempotency")`) and answers as usual; the middleware stores
// that answer on the key row in the same transaction and sends it (or the replay, 409, 422, 410).
import type { MiddlewareHandler } from "hono";
import { createMiddleware } from "hono/factory";

import * as core from "./core.js";
import type { Answer } from "./core.js";
import type { IdempotentEndpoint } from "./endpoint.js";
import { type BodyLimits, parseJsonBody, readWebBody } from "./http.js";

/** What the protected handler finds at `c.get("idempotency")`. */
export interface IdempotencyVariables<Tx> {
  /** The open transaction, the body as JSON and the key. */
  idempotency: {
    /** The open transaction: write the app's rows through it, so they commit with the key row. */
    tx: Tx;
    /** The request body, parsed as JSON. */
    json: unknown;
    /** The idempotency key. */
    key: string;
  };
}

/** The Hono environment of a protected route. */
export interface IdempotencyEnv<Tx> {
  /** `c.get("idempotency")`. */
  Variables: IdempotencyVariables<Tx>;
}

/** Options of {@link idempotency}. */
export interface HonoOptions extends BodyLimits {
  /** The scope of the request's key (its account), from the request's headers; the endpoint's scope when absent. */
  scope?: (headers: Headers) => string | undefined;
}

function toResponse(answer: Answer): Response {
  const headers = new Headers();
  for (const [name, value] of answer.headers) headers.append(name, value);
  return new Response(answer.body === "" ? null : answer.body, { status: answer.status, headers });
}

/**
 * The middleware: the key (400 before the body is read), the body within the limits and as JSON (else a
 * problem answer, nothing stored), then the route's handler inside the key row's transaction.
 *
 * ```ts
 * app.post("/api/orders", idempotency(endpoint), async (c) => {
 *   const { tx, json } = c.get("idempotency");
 *   const { rows } = await tx.query("INSERT INTO orders (sku) VALUES ($1) RETURNING id", [json.sku]);
 *   return c.json({ id: rows[0].id }, 201);
 * });
 * ```
 *
 * A handler that throws rolls back its rows and the key row; the error goes to Hono's error handler.
 */
export function idempotency<Tx>(endpoint: IdempotentEndpoint<Tx>, options: HonoOptions = {}): MiddlewareHandler<IdempotencyEnv<Tx>> {
  return createMiddleware<IdempotencyEnv<Tx>>(async (c, next) => {
    const keyHeader = c.req.raw.headers.get("idempotency-key");
    // Headers joins a repeated field's values with ", ": split them back, as the key grammar has no comma-space.
    const values = keyHeader === null ? [] : keyHeader.split(", ");
    const keyed = core.keyFromHeader(values);
    if ("answer" in keyed) {
      c.res = toResponse(keyed.answer);
      return;
    }
    const body = await readWebBody(c.req.raw.body, c.req.header("content-length"), options);
    if (!(body instanceof Uint8Array)) {
      c.res = toResponse(body);
      return;
    }
    const parsed = parseJsonBody(c.req.header("content-type"), body);
    if ("answer" in parsed) {
      c.res = toResponse(parsed.answer);
      return;
    }
    const scope = options.scope?.(c.req.raw.headers);
    const request = { method: c.req.method, path: c.req.path, keyHeader: values, body, ...(scope === undefined ? {} : { scope }) };
    const result = await endpoint.run(request, async (tx) => {
      c.set("idempotency", { tx, json: parsed.json, key: keyed.key });
      await next();
      if (c.error !== undefined) throw c.error;
      const headers = [...c.res.headers].filter(([name]) => name !== "content-length");
      return { status: c.res.status, headers: Object.fromEntries(headers), body: await c.res.text() };
    });
    c.res = undefined;
    c.res = toResponse(result.answer);
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
