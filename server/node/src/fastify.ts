// Fastify 5: a plugin (fastify-plugin, an onRoute hook, a request decorator) that protects every route whose
// config says `idempotent: true`, registered after it. The plugin adds its hooks to those routes alone, so an
// unprotected route runs none of its code. The route's handler runs inside the key row's transaction
// (`request.idempotency`) and replies as usual; the plugin stores that reply on the key row in the same
// transaction and sends it (or the replay, 409, 422, 410 without running the handler).
import { Readable } from "node:stream";

import type { FastifyPluginAsync, FastifyReply, FastifyRequest, onErrorAsyncHookHandler, onRequestHookHandler, onSendHookHandler, preHandlerAsyncHookHandler, preParsingAsyncHookHandler } from "fastify";
import fp from "fastify-plugin";

import * as core from "./core.js";
import type { Answer } from "./core.js";
import type { HandlerAnswer, IdempotentEndpoint, RunResult } from "./endpoint.js";
import { type BodyLimits, keyHeader, parseJson, readBody } from "./http.js";

/** What a protected route's handler finds at `request.idempotency`. */
export interface FastifyIdempotency {
  /** The open transaction: write the app's rows through it, so they commit with the key row. */
  tx: unknown;
  /** The request body, parsed as JSON. */
  json: unknown;
  /** The idempotency key. */
  key: string;
}

/** Options of {@link idempotentPlugin}. */
export interface FastifyOptions<Tx> extends BodyLimits {
  /** The endpoint whose key rows protect the routes. */
  endpoint: IdempotentEndpoint<Tx>;
  /** The scope of the request's key (its account); the endpoint's scope when absent or undefined. */
  scope?: (request: FastifyRequest) => string | undefined;
}

/**
 * Thrown by reading `request.idempotency` in the plugin's context where it did not open a key row's
 * transaction: on a route without `config: { idempotent: true }`, on one registered before the plugin (or
 * before its registration was awaited), or in a hook that runs before the plugin's `preHandler`. Thrown in
 * the handler, it comes before any row is written: nothing is stored and Fastify answers 500.
 */
export class IdempotencyNotSetError extends Error {
  /** `IdempotencyNotSetError`. */
  override name = "IdempotencyNotSetError";
  constructor() {
    super("request.idempotency exists only on routes with `config: { idempotent: true }` registered after idempotentPlugin (`await app.register(idempotentPlugin, ...)` before them), read from the handler on");
  }
}

declare module "fastify" {
  interface FastifyRequest {
    /**
     * The key row's open transaction, the JSON body and the key, in the handler of a route with
     * `config: { idempotent: true }` registered after the plugin; reading it anywhere else in the plugin's
     * context throws {@link IdempotencyNotSetError} (outside that context it is undefined).
     */
    readonly idempotency: FastifyIdempotency;
  }
  interface FastifyContextConfig {
    /** Protect this route with the key row of each request. */
    idempotent?: boolean;
  }
}

/** One protected request in progress: its key, the body read before parsing, then the transaction's handshake. */
interface InFlight {
  key: string;
  /** Undefined until `preParsing` has read it. */
  body?: Uint8Array;
  json?: unknown;
  /** Settles the handler's answer (or its error) into the open transaction. */
  settle?: { resolve: (answer: HandlerAnswer) => void; reject: (error: unknown) => void };
  result?: Promise<RunResult>;
}

/** The request's decoration holding its {@link InFlight} (null on a route that is not protected, and once done). */
const STATE = Symbol("idempotent-endpoint");
/** The request's decoration holding what `request.idempotency` returns (null until the transaction is open). */
const VIEW = Symbol("idempotent-endpoint view");
type WithState = FastifyRequest & { [STATE]: InFlight | null; [VIEW]: FastifyIdempotency | null };

function send(reply: FastifyReply, answer: Answer): FastifyReply {
  reply.code(answer.status);
  for (const [name, value] of answer.headers) reply.header(name, value);
  // A Buffer, so that Fastify sends the body and its content-type exactly as given (no charset added).
  return reply.send(Buffer.from(answer.body));
}

const plugin: FastifyPluginAsync<FastifyOptions<unknown>> = async (fastify, options) => {
  const { endpoint } = options;
  // A getter, so that a handler the plugin does not protect gets a typed error rather than a silent null.
  fastify.decorateRequest("idempotency", {
    getter(this: FastifyRequest): FastifyIdempotency {
      const view = (this as WithState)[VIEW];
      if (view === null) throw new IdempotencyNotSetError();
      return view;
    },
  });
  // Decorated, so that every request has the properties from the start (Fastify keeps its requests' shape).
  fastify.decorateRequest(STATE, null);
  fastify.decorateRequest(VIEW, null);

  // The hooks below run only on protected routes (onRoute puts them there), so none looks at the route's config.
  // The key before the body is read. Synchronous, so a callback hook (no promise per request).
  const onRequest: onRequestHookHandler = (request, reply, done) => {
    const keyed = core.keyFromHeader(keyHeader(request.raw));
    // Answered here: Fastify goes no further (done is not called).
    if ("answer" in keyed) return void send(reply, keyed.answer);
    (request as WithState)[STATE] = { key: keyed.key };
    done();
  };

  // The raw body within the limits and as JSON (the fingerprint is over its bytes); Fastify then parses
  // the same bytes.
  const preParsing: preParsingAsyncHookHandler = async (request, reply, payload) => {
    const state = (request as WithState)[STATE];
    if (state === null) return payload;
    const body = await readBody(request.raw, options);
    if (!(body instanceof Uint8Array)) return send(reply, body);
    const parsed = parseJson(request.raw, body);
    if ("answer" in parsed) return send(reply, parsed.answer);
    state.body = body;
    state.json = parsed.json;
    // A stream already holding the bytes and its end (Readable.from would read them through an async iterator).
    const replay = new Readable({ read: () => undefined });
    replay.push(Buffer.isBuffer(body) ? body : Buffer.from(body));
    replay.push(null);
    return replay;
  };

  // The transaction: a replay (409, 422, 410) is answered here; a new key hands the handler the open one.
  const preHandler: preHandlerAsyncHookHandler = async (request, reply) => {
    const state = (request as WithState)[STATE];
    if (state?.body === undefined) return;
    const scope = options.scope?.(request);
    const run = { method: request.method, path: request.url.split("?")[0] ?? "/", keyHeader: keyHeader(request.raw), body: state.body, headers: request.raw.headers, ...(scope === undefined ? {} : { scope }) };
    // Whichever comes first: the transaction open for the handler, or the run's end without it.
    const first = await new Promise<{ tx: unknown } | { done: RunResult }>((resolve, reject) => {
      const result = endpoint.run(run, (tx) => {
        resolve({ tx });
        return new Promise<HandlerAnswer>((settled, failed) => (state.settle = { resolve: settled, reject: failed }));
      });
      result.then((done) => resolve({ done }), reject);
      state.result = result;
    });
    if ("done" in first) {
      (request as WithState)[STATE] = null;
      return send(reply, first.done.answer);
    }
    (request as WithState)[VIEW] = { tx: first.tx, json: state.json, key: state.key };
  };

  // The handler's reply, stored on the key row in its transaction; what is sent is what was committed.
  const onSend: onSendHookHandler = async (request, reply, payload) => {
    const state = (request as WithState)[STATE];
    if (state?.settle === undefined || state.result === undefined) return payload;
    (request as WithState)[STATE] = null;
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(reply.getHeaders())) {
      if (value !== undefined && name !== "content-length") headers[name] = Array.isArray(value) ? value.join(", ") : String(value);
    }
    state.settle.resolve({ status: reply.statusCode, headers, body: typeof payload === "string" ? payload : String(payload ?? "") });
    const { answer } = await state.result;
    reply.code(answer.status);
    for (const name of Object.keys(reply.getHeaders())) reply.removeHeader(name);
    for (const [name, value] of answer.headers) reply.header(name, value);
    return answer.body;
  };

  // A handler that throws: its rows and the key row roll back before Fastify answers the error.
  const onError: onErrorAsyncHookHandler = async (request, _reply, error) => {
    const state = (request as WithState)[STATE];
    if (state?.settle === undefined) return;
    (request as WithState)[STATE] = null;
    state.settle.reject(error);
    await state.result?.catch(() => undefined);
  };

  // The hooks on each protected route registered after the plugin (in its context or a child's), ahead of
  // the route's own: a route's preHandler finds `request.idempotency`, and its onSend sees the answer as
  // stored, the same as on a replay. A new array each time: the caller's array may be shared with other routes.
  fastify.addHook("onRoute", (route) => {
    if (route.config?.idempotent !== true) return;
    route.onRequest = first(onRequest, route.onRequest);
    route.preParsing = first(preParsing, route.preParsing);
    route.preHandler = first(preHandler, route.preHandler);
    route.onSend = first(onSend, route.onSend);
    route.onError = first(onError, route.onError);
  });
};

/** `ours`, then the route's own hook or hooks (`ours` once, should the route pass through onRoute again). */
function first<Hook>(ours: Hook, theirs: Hook | Hook[] | undefined): Hook[] {
  const own = theirs === undefined ? [] : Array.isArray(theirs) ? theirs : [theirs];
  return [ours, ...own.filter((hook) => hook !== ours)];
}

/**
 * The plugin: register it once with the endpoint, before the routes it protects, then mark each protected
 * route with `config: { idempotent: true }`. Its `onRoute` hook puts its hooks on those routes alone (ahead of
 * the route's own hooks), so the other routes run none of its code; a marked route registered before it in
 * its context is not protected, and its handler's `request.idempotency` throws {@link IdempotencyNotSetError}.
 * Bad input is answered with a problem before anything is stored.
 *
 * ```ts
 * await app.register(idempotentPlugin, { endpoint });
 * app.post("/api/orders", { config: { idempotent: true } }, async (request, reply) => {
 *   const { tx, json } = request.idempotency;
 *   const { rows } = await (tx as PoolClient).query("INSERT INTO orders (sku) VALUES ($1) RETURNING id", [json.sku]);
 *   return reply.code(201).send({ id: rows[0].id });
 * });
 * ```
 */
export const idempotentPlugin = fp(plugin, { fastify: "5.x", name: "idempotent-endpoint" });

/**
 * The key-status routes at `path` (default `/idempotency-keys/:key`): GET answers what the server knows of a
 * key, POST settles it (the fence); the contract in server/README.md, "Key status".
 */
export function keyStatusRoutes<Tx>(
  fastify: { get: (path: string, handler: (request: FastifyRequest, reply: FastifyReply) => Promise<FastifyReply>) => unknown; post: (path: string, handler: (request: FastifyRequest, reply: FastifyReply) => Promise<FastifyReply>) => unknown },
  endpoint: IdempotentEndpoint<Tx>,
  options: { path?: string; scope?: (request: FastifyRequest) => string | undefined } = {},
): void {
  const path = options.path ?? "/idempotency-keys/:key";
  const key = (request: FastifyRequest): string => String((request.params as Record<string, unknown>)["key"] ?? "");
  fastify.get(path, async (request, reply) => send(reply, await endpoint.status(key(request), options.scope?.(request))));
  fastify.post(path, async (request, reply) => send(reply, await endpoint.settle(key(request), options.scope?.(request))));
}
