// A stored intent taken up again by its id: `client.resume(id)` (its persisted request checked again
// like a new one) and the operation `client.reconcile(id)` and `client.settle(id)` ask about. A part
// loaded on first use (lazy.ts), or with a client whose options use it (client.ts): the quick start
// never resumes. It shares no module state with the entry, so the entry's functions it works with come
// in one object (`ResumeKit`, made in client.ts).

import { describe } from "./describe.js";
import { IdempotentFetchError } from "./errors.js";
import type { ClientCore, loadRecord } from "./core.js";
import type { Fields } from "./fields.js";
import type { ResumeOptions } from "./client.js";
import type { fingerprint } from "./fingerprint.js";
import type { corruptRecord, notFound, storageUnavailable } from "./messages.js";
import type { IdempotentOperation, intentIdArg, viewOf } from "./operation.js";
import type { pageLocation, prepareParts } from "./request.js";

/** The entry's functions this part uses, by their names there (`hashOf` is `fingerprint`,
 *  `operationOf` `IdempotentOperation.create`, `fieldsOf` `Fields.of`). Each name is one the bundles
 *  shorten (package/build.mjs `DRIVER_PRIVATE`): no other property may have it. */
export interface ResumeKit {
  loadRecord: typeof loadRecord;
  viewOf: typeof viewOf;
  intentIdArg: typeof intentIdArg;
  notFound: typeof notFound;
  corruptRecord: typeof corruptRecord;
  storageUnavailable: typeof storageUnavailable;
  prepareParts: typeof prepareParts;
  pageLocation: typeof pageLocation;
  hashOf: typeof fingerprint;
  operationOf: typeof IdempotentOperation.create;
  fieldsOf: typeof Fields.of;
  /** The out-of-line body of a stored request (stored-request.ts `readBody`, through its loader). */
  storedBody(store: ClientCore["store"], intentId: string, length: number): Promise<Uint8Array<ArrayBuffer> | undefined>;
}

/** `client.resume(intentId, options)`: the stored request re-read like a new one, its origin and
 *  its fingerprint checked (see `IdempotentClient.resume`). */
export async function resumeIntent(kit: ResumeKit, core: ClientCore, intentId: unknown, options: unknown): Promise<IdempotentOperation> {
  const id = kit.intentIdArg(intentId);
  const given = resumeHeaders(kit, options, true);
  const pendingOnly = (options as ResumeOptions | undefined)?.pendingOnly === true;
  const loaded = await kit.loadRecord(core, await core.engine(), id);
  if (!loaded) throw kit.notFound(id);
  const { machine, request } = loaded;
  try {
    if (!request) {
      throw invalidRequest(
        __DEV__ && `intent "${id}" was stored without its request (persistRequest is off); begin it again with the same request`,
      );
    }
    // Storage is writable by any script of the origin: the stored request is re-read like a new one.
    const config = core.config;
    const names = new Set(given.map(([name]) => name));
    const { body } = request;
    const prepared = await kit.prepareParts(
      request.url,
      request.method,
      [...request.headers.filter(([name]) => !names.has(name)), ...given],
      typeof body === "number" ? await readStoredBody(kit, core, id, body) : body && new Uint8Array(body),
      config.headerName,
      config.maxBodyBytes,
    );
    const origin = new URL(prepared.url).origin;
    const href = kit.pageLocation();
    // An opaque origin ("null": data: or sandboxed pages) has no origin to compare with.
    const page = href === undefined ? "null" : new URL(href).origin;
    if (page !== "null" && origin !== page && !config.resumeOrigins.includes(origin)) {
      throw invalidRequest(
        __DEV__ && `the persisted request of intent "${id}" goes to ${origin}, not this page's origin; list it in resumeOrigins to allow it`,
      );
    }
    const expected = await kit.hashOf(prepared, loaded.ids.plain ? undefined : await core.secret());
    if (expected !== loaded.ids.fingerprint) {
      throw new IdempotentFetchError("STORAGE", __DEV__ && `the persisted request of intent "${id}" does not match its fingerprint`);
    }
    // A stored intent: its key existed before.
    return kit.operationOf(core, kit.viewOf(machine, loaded.ids), true, prepared, undefined, undefined, pendingOnly);
  } finally {
    machine.free();
  }
}

/** A stored intent's operation for a question about its key (`client.reconcile`, `client.settle`),
 *  with `options.headers` (credentials). */
export async function storedOperation(kit: ResumeKit, core: ClientCore, intentId: unknown, options: unknown): Promise<IdempotentOperation> {
  const id = kit.intentIdArg(intentId);
  const { signal: _, ...rest } = (options ?? {}) as { signal?: unknown };
  const headers = resumeHeaders(kit, rest);
  const loaded = await kit.loadRecord(core, await core.engine(), id);
  if (!loaded) throw kit.notFound(id);
  const view = kit.viewOf(loaded.machine, loaded.ids);
  loaded.machine.free();
  const request = { method: "GET", url: kit.pageLocation() ?? "http://localhost/", headers, body: null };
  // A stored intent: its key existed before.
  return kit.operationOf(core, view, true, request);
}

const invalidRequest = (message: string | false) => new IdempotentFetchError("INVALID_REQUEST", message);
const invalidOptions = (message: string | false) => new IdempotentFetchError("INVALID_OPTIONS", message);

/** The out-of-line body of a resumed request: STORAGE when it cannot be read or is not the bytes
 *  its record names. */
async function readStoredBody(kit: ResumeKit, core: ClientCore, intentId: string, length: number): Promise<Uint8Array<ArrayBuffer>> {
  let bytes: Uint8Array<ArrayBuffer> | undefined;
  try {
    bytes = await kit.storedBody(core.store, intentId, length);
  } catch (thrown) {
    throw kit.storageUnavailable(intentId, thrown);
  }
  if (!bytes) throw kit.corruptRecord(intentId, `its request's body is not the ${length} bytes stored`);
  return bytes;
}

/** `options.headers` of `resume` (`withPendingOnly`: `pendingOnly` allowed too, checked) or
 *  `reconcile` as lowercase pairs; INVALID_OPTIONS / INVALID_REQUEST when bad. */
function resumeHeaders(kit: ResumeKit, options: unknown, withPendingOnly = false): [string, string][] {
  if (options === undefined || options === null) return [];
  const fields = kit.fieldsOf(options, "", "resume options", invalidOptions).only(withPendingOnly ? ["headers", "pendingOnly"] : ["headers"]);
  if (withPendingOnly) fields.boolean("pendingOnly");
  const init = fields.value("headers");
  try {
    return init === undefined ? [] : [...new Headers(init as HeadersInit)];
  } catch (thrown) {
    throw invalidRequest(__DEV__ && `resume options.headers are invalid: ${describe(thrown)}`);
  }
}
