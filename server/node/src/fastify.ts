// Fastify 5: a plugin (fastify-plugin, hooks, a request decorator) that protects every route whose config
// says `idempotent: true`. The route's handler runs inside the key row's transaction (`request.idempotency`)
// and replies as usual; the plugin stores that reply on the key row in the same transaction and sends it
// (or the replay, 409, 422, 410 without running the handler).
import { Readable } from "node:stream";

import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
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

declare module "fastify" {
  interface FastifyRequest {
    /** Set on routes with `config: { idempotent: true }` while the handler runs in the key row's transaction. */
    idempotency: FastifyIdempotency | null;
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
type WithState = FastifyRequest & { [STATE]: InFlight | null };

function send(reply: FastifyReply, answer: Answer): FastifyReply {
  reply.code(answer.status);
  for (const [name, value] of answer.headers) reply.header(name, value);
  // A Buffer, so that Fastify sends the body and its content-type exactly as given (no charset added).
  return reply.send(Buffer.from(answer.body));
}

const plugin: FastifyPluginAsync<FastifyOptions<unknown>> = async (fastify, options) => {
  const { endpoint } = options;
  fastify.decorateRequest("idempotency", null);
  // Decorated, so that every request has the property from the start (Fastify keeps its requests' shape).
  fastify.decorateRequest(STATE, null);

  // The key before the body is read. Synchronous, so a callback hook (no promise per request).
  fastify.addHook("onRequest", (request, reply, done) => {
    if (request.routeOptions.config.idempotent !== true) return done();
    const keyed = core.keyFromHeader(keyHeader(request.raw));
    // Answered here: Fastify goes no further (done is not called).
    if ("answer" in keyed) return void send(reply, keyed.answer);
    (request as WithState)[STATE] = { key: keyed.key };
    done();
  });

  // The raw body within the limits and as JSON (the fingerprint is over its bytes); Fastify then parses
  // the same bytes.
  fastify.addHook("preParsing", async (request, reply, payload) => {
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
  });

  // The transaction: a replay (409, 422, 410) is answered here; a new key hands the handler the open one.
  fastify.addHook("preHandler", async (request, reply) => {
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
    request.idempotency = { tx: first.tx, json: state.json, key: state.key };
  });

  // The handler's reply, stored on the key row in its transaction; what is sent is what was committed.
  fastify.addHook("onSend", async (request, reply, payload) => {
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
  });

  // A handler that throws: its rows and the key row roll back before Fastify answers the error.
  fastify.addHook("onError", async (request, _reply, error) => {
    const state = (request as WithState)[STATE];
    if (state?.settle === undefined) return;
    (request as WithState)[STATE] = null;
    state.settle.reject(error);
    await state.result?.catch(() => undefined);
  });
};

/**
 * The plugin: register it once with the endpoint, then mark each protected route with
 * `config: { idempotent: true }`. Bad input is answered with a problem before anything is stored.
 *
 * ```ts
 * await app.register(idempotentPlugin, { endpoint });
 * app.post("/api/orders", { config: { idempotent: true } }, async (request, reply) => {
 *   const { tx, json } = request.idempotency!;
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
