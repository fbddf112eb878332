// Next.js App Router: a route handler wrapper. `export const POST = idempotentRoute(endpoint, handler)`: the
// handler gets the request and the open transaction, returns a `Response` or a plain answer; the wrapper
// stores it on the key row in the same transaction and answers with what was committed (or the replay,
// 409, 422, 410).
import type { Answer } from "./core.js";
import type { IdempotentEndpoint } from "./endpoint.js";
import { runWeb, toResponse, type WebAnswer, type WebContext, type WebOptions } from "./web.js";

/**
 * The endpoint, a promise of it, or a function that makes it on the first request (a route module is
 * loaded by `next build` too, where no database should be opened).
 */
export type EndpointRef<Tx> = IdempotentEndpoint<Tx> | Promise<IdempotentEndpoint<Tx>> | (() => Promise<IdempotentEndpoint<Tx>>);

/** The endpoint `ref` names: a function's is made once, on the first call, and shared. */
function resolver<Tx>(ref: EndpointRef<Tx>): () => Promise<IdempotentEndpoint<Tx>> {
  if (typeof ref !== "function") return async () => ref;
  let made: Promise<IdempotentEndpoint<Tx>> | undefined;
  return () => {
    // A failed setup is not kept: the next request tries again.
    made ??= ref().catch((error: unknown) => {
      made = undefined;
      throw error;
    });
    return made;
  };
}

/**
 * A protected App Router route handler.
 *
 * ```ts
 * // app/api/orders/route.ts
 * export const POST = idempotentRoute(endpoint, async (request, { tx, json }) => {
 *   const { rows } = await tx.query("INSERT INTO orders (sku) VALUES ($1) RETURNING id", [json.sku]);
 *   return { status: 201, body: { id: rows[0].id } };
 * });
 * ```
 *
 * The handler answers with a plain answer (a body that is not a string is sent as JSON), which is stored
 * as it is, or with a `Response` (`Response.json(...)`), whose body is read back first: the costlier of the
 * two ({@link WebAnswer}). The wrapper answers with a `Response` either way.
 *
 * Bad input (a missing, malformed or over-long key, a body over the limits or not JSON) gets its problem
 * answer and stores nothing. A handler that throws rolls back its rows and the key row, and the error goes
 * to Next (a 500).
 */
export function idempotentRoute<Tx>(
  endpoint: EndpointRef<Tx>,
  handler: (request: Request, context: WebContext<Tx>) => Promise<WebAnswer>,
  options: WebOptions = {},
): (request: Request) => Promise<Response> {
  const run = (made: IdempotentEndpoint<Tx>, request: Request): Promise<Response> => runWeb(made, request, (context) => handler(request, context), options);
  // An endpoint given as it is is used at once (one await less per request); a promise or a maker is awaited.
  if (typeof endpoint !== "function" && !("then" in endpoint)) return (request) => run(endpoint, request);
  const resolve = resolver(endpoint);
  return async (request) => run(await resolve(), request);
}

/** The parameters of a key-status route. */
export interface KeyParams {
  /** The key, from the folder `[key]`. */
  key?: string | string[];
}

/** The route context Next passes a dynamic route (`params` is a promise since Next 15). */
export interface KeyRouteContext {
  /** The route's parameters: `key` from the folder `[key]`. */
  params: Promise<KeyParams>;
}

/**
 * The key-status handlers for `app/.../idempotency-keys/[key]/route.ts`: `export const { GET, POST } =
 * keyStatusRoute(endpoint)`. GET answers what the server knows of a key, POST settles it (the fence); the
 * contract in server/README.md, "Key status".
 */
export function keyStatusRoute<Tx>(endpoint: EndpointRef<Tx>, options: { scope?: (headers: Headers) => string | undefined } = {}) {
  const resolve = resolver(endpoint);
  const answer = async (request: Request, context: KeyRouteContext, of: (e: IdempotentEndpoint<Tx>, key: string, scope?: string) => Promise<Answer>) => {
    const { key } = await context.params;
    return toResponse(await of(await resolve(), typeof key === "string" ? key : "", options.scope?.(request.headers)));
  };
  return {
    /** GET: the key's status. */
    GET: (request: Request, context: KeyRouteContext): Promise<Response> => answer(request, context, (e, k, s) => e.status(k, s)),
    /** POST: settle the key. */
    POST: (request: Request, context: KeyRouteContext): Promise<Response> => answer(request, context, (e, k, s) => e.settle(k, s)),
  };
}

export type { WebAnswer, WebContext, WebOptions };
