// Client options: type-checked (unknown fields, wrong types, NaN, negatives and absurd values are
// INVALID_OPTIONS naming the field) and defaulted here, in one place. The Engine's options, their
// defaults and ranges are the contract table's (src/contract.rs, generated `OPTIONS`): the machine
// checks the same ranges again (it trusts nothing from JavaScript); the driver's check gives the messages.

import { type KeyIn, type Placement } from "./placement.js";
import type { KeyStatusAnswer, KeyStatusQuestion, Reconciler } from "./reconcile.js";
import { invalidOptions } from "./errors.js";
import { Fields } from "./fields.js";
import type { HeaderForm, Jitter, RetryOptions } from "./generated/contract.js";
import { OPT_BASE_DELAY_MS, OPT_MAX_DELAY_MS, OPT_RECONCILE, OPT_REPLAY_STATUS, OPTIONS } from "./machine.js";
import type { IntentObserver } from "./observer.js";
import { type AsyncStorage, isAsyncStorage } from "./storage/async-storage.js";

/** Where intents are kept ("custom": an `AsyncStorage` of the app's own). */
export type StorageKind = "local" | "session" | "indexeddb" | "memory" | "custom";

// The retry options and the names of the options given by name are the contract table's
// (src/contract.rs): generated with their ranges and defaults.
export type { HeaderForm, Jitter, RetryOptions };

/** Options of `new IdempotentClient(options)`. Unknown fields are rejected. */
export interface ClientOptions {
  /** Keeps one account's intents apart from another's (e.g. the account id). Default "default". */
  namespace?: string;
  /**
   * Where intents are kept. Default "local" in a page, "indexeddb" in a worker (no localStorage there),
   * "memory" where there is neither (Node). Blocked, absent or full storage falls back to "memory"
   * (see `storageFallback`); for "indexeddb" that is known once the first operation has settled.
   * Or an `AsyncStorage` of your own (`idempotent-fetch-client/file` in Node): `client.storage` is then "custom".
   */
  storage?: Exclude<StorageKind, "custom"> | AsyncStorage;
  /** How one `send` retries: attempts, backoff, jitter, timeouts. */
  retry?: RetryOptions;
  /** Keys older than this many ms are reported as expired rather than re-sent (24 h: Stripe's retention).
   *  @default 86400000 */
  keyTtlMs?: number;
  /** Header carrying the key. Default "Idempotency-Key". */
  headerName?: string;
  /** "raw" (Stripe: `Idempotency-Key: <uuid>`) or "sf-string" (IETF draft: `"<uuid>"`).
   *  @default "raw" */
  headerForm?: HeaderForm;
  /** Where the key goes: `"header"` (default: `headerName`), `{ json: "idempotency_key" }` (a
   *  top-level field of a JSON object body, Square's form) or `{ graphqlVariable: "idempotencyKey" }`
   *  (a GraphQL variable, Saleor's form). In the body, no key header is sent; a body that cannot
   *  carry the key is `INVALID_REQUEST` at `begin`. */
  keyIn?: KeyIn;
  /** Retry budget (token bucket) capacity shared by the client's intents (0: no retries).
   *  @default 500 */
  retryBudget?: number;
  /** Also persist the request (headers and body) so `resume` can re-send it after a reload. Default false. */
  persistRequest?: boolean;
  /** Overrides the built-in classification: true = retry, false = definite, undefined = default. */
  shouldRetry?: (status: number) => boolean | undefined;
  /** More answer headers that mark a replayed answer (`<name>: true`), besides the ones server
   *  libraries use: `Idempotent-Replayed`, `Idempotency-Replayed` and `X-Idempotent-Replayed`. */
  replayHeaders?: string[];
  /** The status a server answers replays with, instead of a replay header and the stored status
   *  (django-idempotency-key: 409 with the original body). Such servers store only requests they
   *  completed, so an answer with it finishes the intent as succeeded: `ok: true`, `replayed: true`,
   *  `status` this status (with `statusUrl` or `reconcile` the client asks for the original status
   *  first). Only for such servers: everywhere else 409 means "still in progress". Default none. */
  replayStatus?: number;
  /** Where to ask the server what became of a key (the key-status protocol in the README, "Your
   *  server"): a URL template with `{key}` (e.g. "/api/idempotency-keys/{key}"), or a function of the
   *  key. Then the client asks by itself where it would otherwise give up with a key it cannot
   *  explain (an expired key, an exhausted send whose attempts may have reached the server, an
   *  uncertain failure), and `reconcile()` asks on request. Default none. */
  statusUrl?: string | ((key: string) => string);
  /** Instead of `statusUrl`, the app's own lookup for servers without the key-status endpoint (e.g.
   *  `GET /orders?key=…`): answers `{ status: "done", response }`, `{ status: "in_flight",
   *  retryAfterMs? }` or `{ status: "unknown" }`; a throw or anything else is "could not ask". */
  reconcile?: (question: KeyStatusQuestion) => Promise<KeyStatusAnswer>;
  /** With `persistRequest`: only these request headers are stored (besides the content type).
   *  Authorization, Cookie and Proxy-Authorization are never stored. Default: every other header. */
  persistHeaders?: string[];
  /** Origins besides the page's that `resume()` may send a persisted request to. Default none. */
  resumeOrigins?: string[];
  /** Largest request body, in bytes, checked before the body is copied (`BODY_TOO_LARGE`).
   *  Default 1048576 (1 MiB). */
  maxBodyBytes?: number;
  /** `begin` refuses (`NOT_DURABLE`) rather than start an intent whose key would not survive a
   *  reload (storage fell back to memory). Not with `storage: "memory"`. Default false. */
  requireDurable?: boolean;
  /** Retired (succeeded, failed) records kept per namespace; past it the oldest are deleted, and
   *  the oldest half when storage is full. Pending intents are never deleted. Default 1000, 0..100000. */
  maxRetiredRecords?: number;
  /** Watches each send: `otelObserver(tracer)` from `idempotent-fetch-client/otel` traces intents
   *  with OpenTelemetry. Default none (nothing is watched, no trace context is sent or stored). */
  observer?: IntentObserver;
}

/** The parsed, validated, defaulted options of one client. */
export interface Config {
  namespace: string;
  storage: StorageKind | AsyncStorage;
  /** The Engine's options by `OPT_*` index, as `Engine.create` takes them (names as indexes). */
  engine: Float64Array;
  headerName: string;
  /** `keyIn` in the body; undefined: the header. */
  keyIn: Placement | undefined;
  persistRequest: boolean;
  shouldRetry: ((status: number) => unknown) | undefined;
  /** Lower-case names of the headers that mark a replay, the defaults first. */
  replayHeaders: string[];
  /** How to ask the server about a key (`statusUrl` / `reconcile`; both undefined: never asked). */
  reconciler: Reconciler;
  /** Lower-case names of the headers persisted with `persistRequest`; undefined: all but credentials. */
  persistHeaders: string[] | undefined;
  /** Origins (`URL.origin` form) `resume()` may send to besides the page's. */
  resumeOrigins: string[];
  maxBodyBytes: number;
  requireDurable: boolean;
  maxRetiredRecords: number;
  observer: IntentObserver | undefined;
}

/** Default cap of retired records per namespace: a retired record (about 250 bytes) serves a second
 *  click or a reload of a recent intent; 1000 of them are about 250 KB, 5 % of a 5 MB quota. */
export const DEFAULT_MAX_RETIRED_RECORDS = 1000;
/** Largest cap accepted (about 25 MB of records: more than any browser's localStorage quota). */
const MAX_RETIRED_RECORDS_LIMIT = 100_000;

/** Default body size cap: 1 MiB (a payment or order body is a few KiB). */
export const DEFAULT_MAX_BODY_BYTES = 1 << 20;
/** Largest body cap accepted: 256 MiB (a body is buffered in memory to be fingerprinted and re-sent). */
const MAX_BODY_BYTES_LIMIT = 1 << 28;

/** The replay headers of the widely used server libraries (Stripe and most middlewares; some spell it
 *  after the request header). */
export const DEFAULT_REPLAY_HEADERS = ["idempotent-replayed", "idempotency-replayed", "x-idempotent-replayed"];
export const DEFAULT_NAMESPACE = "default";
export const DEFAULT_HEADER_NAME = "Idempotency-Key";

/** The retry options users may set (the `retry.` rows of `OPTIONS`). */
const RETRY_FIELDS = OPTIONS.flatMap(([path]) => (path.startsWith("retry.") ? [path.slice(6)] : []));
const STORAGE_KINDS: readonly StorageKind[] = ["local", "session", "indexeddb", "memory"];
const ROOT_FIELDS = [
  "namespace",
  "storage",
  "retry",
  "keyTtlMs",
  "headerName",
  "headerForm",
  "keyIn",
  "retryBudget",
  "persistRequest",
  "shouldRetry",
  "replayHeaders",
  "replayStatus",
  "statusUrl",
  "reconcile",
  "persistHeaders",
  "resumeOrigins",
  "maxBodyBytes",
  "requireDurable",
  "maxRetiredRecords",
  "observer",
];

/** RFC 9110 `token` (header names, methods). */
export const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/** An HTTP header name (a token) of at most 64 characters. */
const isHeaderName = (value: unknown): boolean => typeof value === "string" && value.length <= 64 && TOKEN.test(value);

/** Parses `new IdempotentClient(options)`'s argument (`undefined`/`null` mean all defaults). */
export function parseClientOptions(options: unknown): Config {
  const root = Fields.of(options ?? {}, "", "options", invalidOptions).only(ROOT_FIELDS);
  const retry = Fields.of(root.value("retry") ?? {}, "retry.", "retry", invalidOptions).only(RETRY_FIELDS);
  /** An array option of at most `max` items that pass `valid`. */
  const list = (name: string, max: number, valid: (item: unknown) => boolean, what: string): string[] | undefined => {
    const value = root.value(name);
    if (value !== undefined && !(Array.isArray(value) && value.length <= max && value.every(valid))) {
      throw invalidOptions(__DEV__ && `${name} must be an array of at most ${max} ${what}`);
    }
    return value as string[] | undefined;
  };
  const headerNames = (name: string, max: number) =>
    list(name, max, isHeaderName, "HTTP header names")?.map((header) => header.toLowerCase());
  // Converted once: by name to the numbers the Engine takes, defaults and ranges from the table.
  // A row without a name is set by the driver below.
  const engine = Float64Array.from(OPTIONS, ([path, min, max, fallback, names]) => {
    if (!path) return fallback;
    const [fields, name] = path.startsWith("retry.") ? [retry, path.slice(6)] : [root, path];
    return names ? names.indexOf(fields.oneOf(name, names, names[fallback] as string)) : fields.integer(name, fallback, min, max);
  });
  if (engine[OPT_MAX_DELAY_MS]! < engine[OPT_BASE_DELAY_MS]!) throw invalidOptions(__DEV__ && "retry.maxDelayMs must be at least retry.baseDelayMs");
  const reconciler = parseReconciler(root);
  engine[OPT_RECONCILE] = reconciler.statusUrl !== undefined || reconciler.reconcile !== undefined ? 1 : 0;
  // A 2xx needs no marker, and a 3xx never reaches the page (fetch follows redirects).
  engine[OPT_REPLAY_STATUS] = root.value("replayStatus") === undefined ? 0 : root.integer("replayStatus", 0, 400, 599);
  const namespace = root.string("namespace") ?? DEFAULT_NAMESPACE;
  // No ':' so that `<namespace>:<intent id>` slots and lock names of two namespaces never collide.
  // eslint-disable-next-line no-control-regex
  if (namespace.length === 0 || namespace.length > 128 || /[\u0000-\u001f\u007f-\u009f:]/.test(namespace)) {
    throw invalidOptions(__DEV__ && "namespace must be 1 to 128 characters, without ':' or control characters");
  }
  const given = root.value("storage");
  const storage = isAsyncStorage(given) ? given : root.oneOf("storage", STORAGE_KINDS, defaultStorage());
  const requireDurable = root.boolean("requireDurable") ?? false;
  if (requireDurable && storage === "memory") throw invalidOptions(__DEV__ && 'requireDurable cannot be met with storage "memory"');
  const headerName = root.string("headerName") ?? DEFAULT_HEADER_NAME;
  if (!isHeaderName(headerName)) {
    throw invalidOptions(__DEV__ && "headerName must be an HTTP header name (letters, digits and !#$%&'*+-.^_`|~)");
  }
  return {
    namespace,
    storage,
    engine,
    headerName,
    keyIn: parseKeyIn(root.value("keyIn")),
    persistRequest: root.boolean("persistRequest") ?? false,
    shouldRetry: root.typed<(status: number) => unknown>("shouldRetry", "function"),
    replayHeaders: [...DEFAULT_REPLAY_HEADERS, ...(headerNames("replayHeaders", 16) ?? [])],
    reconciler,
    persistHeaders: headerNames("persistHeaders", 64),
    resumeOrigins: list("resumeOrigins", 16, isOrigin, 'origins such as "https://api.example.com"') ?? [],
    maxBodyBytes: root.integer("maxBodyBytes", DEFAULT_MAX_BODY_BYTES, 0, MAX_BODY_BYTES_LIMIT),
    requireDurable,
    maxRetiredRecords: root.integer("maxRetiredRecords", DEFAULT_MAX_RETIRED_RECORDS, 0, MAX_RETIRED_RECORDS_LIMIT),
    observer: root.typed<IntentObserver>("observer", "function"),
  };
}

/** `keyIn`: "header", or one of `{ json }` / `{ graphqlVariable }` naming a field (1 to 128 characters). */
function parseKeyIn(value: unknown): Placement | undefined {
  if (value === undefined || value === "header") return undefined;
  const fields = typeof value === "object" && value !== null ? Object.keys(value) : [];
  const name = fields.length === 1 ? (value as Record<string, unknown>)[fields[0]!] : undefined;
  if ((fields[0] !== "json" && fields[0] !== "graphqlVariable") || typeof name !== "string" || name.length === 0 || name.length > 128) {
    throw invalidOptions(__DEV__ && 'keyIn must be "header", { json: "<field>" } or { graphqlVariable: "<name>" }');
  }
  return fields[0] === "json" ? { field: name } : { variable: name };
}

/** `statusUrl` (a template with `{key}`, or a function) or `reconcile` (a function), not both. */
function parseReconciler(root: Fields): Reconciler {
  const template = root.value("statusUrl");
  const statusUrl =
    typeof template === "function" ? (template as (key: string) => string) : root.string("statusUrl");
  if (typeof statusUrl === "string" && (statusUrl.length > 2048 || !statusUrl.includes("{key}"))) {
    throw invalidOptions(__DEV__ && 'statusUrl must be a URL template with "{key}" (at most 2048 characters), or a function of the key');
  }
  const reconcile = root.typed<Reconciler["reconcile"]>("reconcile", "function");
  if (statusUrl !== undefined && reconcile !== undefined) throw invalidOptions(__DEV__ && "give statusUrl or reconcile, not both");
  return { statusUrl, reconcile };
}

/** An origin exactly as `URL.origin` spells it (scheme://host[:port], no path). */
function isOrigin(value: unknown): boolean {
  if (typeof value !== "string" || value.length > 512) return false;
  try {
    return new URL(value).origin === value;
  } catch {
    return false;
  }
}

/** localStorage in a window; IndexedDB in a worker (no Web Storage there); memory in Node. */
function defaultStorage(): StorageKind {
  const global = globalThis as { window?: unknown; indexedDB?: unknown };
  // `window` first: in a page, the first read of `localStorage` opens the origin's storage area (a
  // round trip to the browser process, ~1-2 ms of the constructor), which `storage: "memory"` never needs.
  if (global.window !== undefined || hasGlobal("localStorage")) return "local";
  return hasGlobal("indexedDB") ? "indexeddb" : "memory";
}

/** Whether `globalThis[name]` is there (reading it can throw where storage is blocked: then it is). */
function hasGlobal(name: string): boolean {
  try {
    const value = (globalThis as Record<string, unknown>)[name];
    return value !== undefined && value !== null;
  } catch {
    return true;
  }
}

/** Options of `client.begin`. */
export interface BeginOptions {
  /** Replace a stored intent of the same id that has a different request (or key): a new key. */
  replace?: boolean;
  /** The key to use instead of minting one: a key your server issued with the checkout session, or
   *  the resource's own id. 16 to 255 characters of `A-Z a-z 0-9 - . _ ~` (`INVALID_REQUEST`
   *  otherwise). Stored and reused like a minted key; another key for an intent already begun is
   *  `INTENT_MISMATCH` unless `replace`. Bring a key that is unique per intent and hard to guess. */
  key?: string;
  /** Let the app's service worker finish the intent if the page cannot (the tab is closed, the
   *  server is down): the request is stored as with `persistRequest` (never its credentials) and a
   *  Background Sync is registered where the browser has one. Needs `storage: "indexeddb"` (a
   *  service worker cannot read the others: `INVALID_OPTIONS`) and `backgroundSync()` from
   *  `idempotent-fetch-client/sw` in the service worker. Default false. */
  background?: boolean;
}

/** `begin`'s options: whether to replace a mismatching stored intent, the key brought, and whether
 *  the service worker may finish it. */
export function parseBeginOptions(options: unknown): { replace: boolean; key: string | undefined; background: boolean } {
  if (options === undefined || options === null) return { replace: false, key: undefined, background: false };
  const fields = Fields.of(options, "", "begin options", invalidOptions).only(["replace", "key", "background"]);
  return { replace: fields.boolean("replace") ?? false, key: fields.string("key"), background: fields.boolean("background") ?? false };
}
