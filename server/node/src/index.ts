// idempotent-endpoint for Node: the server half of the Idempotency-Key protocol, its decisions made by the
// Rust library's code (compiled to wasm), its key rows in the app's own PostgreSQL transaction.
export { idempotentEndpoint, pgStore, pgliteStore } from "./endpoint.js";
export type { EndpointOptions, HandlerAnswer, IdempotentEndpoint, KeyedRequest, RunResult, PgStoreOptions, Store, Queryable } from "./endpoint.js";
export type { Ending, Result, Statement } from "./store.js";
export { CoreError, IDEMPOTENCY_KEY_HEADER, REPLAYED_HEADER, constants } from "./core.js";
export type { Answer, Constants, Decision } from "./core.js";
export { handleKeyed, keyHeader, parseJson, parseJsonBody, readBody, readWebBody, sendAnswer, internalAnswer } from "./http.js";
export type { BodyLimits, HandlerContext, JsonBody, ParsedJson, Refused } from "./http.js";
export { idempotent, keyStatusRoutes } from "./express.js";
export type { ExpressOptions } from "./express.js";
export { MESSAGE_ID_HEADER, backlog, deliveryTraceparent, enqueue, installOutbox, newMessage, outboxWorker } from "./outbox.js";
export type { Backlog, Deliver, Message, OutboxWorker, Pass, WorkerOptions } from "./outbox.js";
export { installInbox, receive, receiveMessage, sweepInbox } from "./inbox.js";
export type { InboxOptions, Received } from "./inbox.js";
export type { TxLike, TxResult } from "./tx.js";
export { FINISHED, Held, KeyBusyError, LeaseLostError, STARTED, atomicPhases } from "./phases.js";
export type { AtomicPhases, Begun, PhasesOptions } from "./phases.js";
export { phasesCompleter } from "./phases-completer.js";
export type { CompleterOptions, PhasesCompleter } from "./phases-completer.js";
export { phasedHandler } from "./phases-http.js";
export type { PhasedOptions } from "./phases-http.js";
export { startDevServer } from "./dev.js";
export type { DevOptions, DevServer } from "./dev.js";
// The Hono middleware is the entry `idempotent-endpoint/hono`, the Fastify plugin `idempotent-endpoint/fastify`,
// the Next.js route wrapper `idempotent-endpoint/next`, the query-builder adapters `idempotent-endpoint/drizzle`
// and `idempotent-endpoint/kysely`, and Prisma's store `idempotent-endpoint/prisma` (each with its library, an
// optional peer).
