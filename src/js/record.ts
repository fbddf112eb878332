// Intent records to and from the JSON text kept in storage: the fields of the record format before
// the TypeScript driver (v 1), so stored intents survive the upgrade, plus `uncertain` (issue 13;
// absent in older records = false). Decoding checks every field's TYPE and refuses unknown fields;
// the machine (`Engine.load`) then checks the VALUES. One place each way.

import { Fields, typeName } from "./fields.js";
import {
  type Engine,
  F_CREATED_AT,
  F_LAST_STATUS,
  F_STATE,
  F_TOTAL_ATTEMPTS,
  F_UNCERTAIN,
  F_UPDATED_AT,
  type Machine,
  STATES,
} from "./machine.js";
import { corruptRecord, fromThrown } from "./messages.js";
import { refused } from "./wasm.js";

/** The record format version this build writes: 2, a fingerprint keyed with the namespace's secret.
 *  Version 1 records (an unkeyed SHA-256 fingerprint) are still read: they are matched with the
 *  unkeyed hash and keep version 1 until retired (at most keyTtlMs). The machine's own record format
 *  is unchanged (version 1), so the driver hands it 1 for both. */
const RECORD_VERSION = 2;
/** Largest record text read back (a record is a few hundred bytes; a persisted body may be more). */
const MAX_RECORD_CHARS = 1 << 20;

/** A request stored with the intent, only with `persistRequest: true` (it may hold card data). */
export interface PersistedRequest {
  method: string;
  url: string;
  headers: [string, string][];
  /** Body bytes as sent; null for none. */
  body: number[] | null;
}

/** What never changes in a record, kept by the driver so that encoding and views do not ask the
 *  machine again (each string getter crosses into wasm and copies). */
export interface RecordIds {
  intentId: string;
  key: string;
  fingerprint: string;
  /** A version-1 record: its fingerprint is the unkeyed SHA-256. */
  plain?: boolean;
}

/** A stored intent: the machine's record, its ids, and the driver-only persisted request. */
export interface LoadedRecord {
  machine: Machine;
  ids: RecordIds;
  request: PersistedRequest | undefined;
}

const RECORD_FIELDS = [
  "v",
  "id",
  "key",
  "fingerprint",
  "createdAt",
  "updatedAt",
  "attempts",
  "state",
  "lastStatus",
  "uncertain",
  "request",
];
const REQUEST_FIELDS = ["method", "url", "headers", "body"];
const U32_MAX = 0xffffffff;

class Malformed extends Error {}
const malformed = (message: string) => new Malformed(message);

/** JSON text -> a validated record (a Machine made by the engine). Throws STORAGE naming the intent. */
export function decodeRecord(engine: Engine, intentId: string, text: string): LoadedRecord {
  let fields: Fields;
  let request: PersistedRequest | undefined;
  let lastStatus: number;
  let uncertain: boolean | undefined;
  let values: { v: number; id: string; key: string; fingerprint: string; createdAt: number; updatedAt: number; attempts: number; state: string };
  try {
    if (text.length > MAX_RECORD_CHARS) throw malformed("record larger than 1 MiB");
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      throw malformed("not JSON");
    }
    fields = Fields.of(parsed, "", "a record", malformed).only(RECORD_FIELDS);
    const state = required(fields.string("state"), "state");
    if (!(STATES as readonly string[]).includes(state)) throw malformed(`unknown state "${state}"`);
    const status = fields.value("lastStatus");
    lastStatus = status === undefined || status === null ? 0 : whole(fields, "lastStatus", 0xffff);
    // 0 means "none" to the machine: a stored 0 is no HTTP status, so it is refused here.
    if (status !== undefined && status !== null && lastStatus === 0) throw malformed("record status 0 is not an HTTP status");
    // Absent in records written before it (the machine reads that as false).
    uncertain = fields.boolean("uncertain");
    const requestValue = fields.value("request");
    request = requestValue === undefined ? undefined : decodeRequest(requestValue);
    values = {
      v: whole(fields, "v", U32_MAX),
      id: required(fields.string("id"), "id"),
      key: required(fields.string("key"), "key"),
      fingerprint: required(fields.string("fingerprint"), "fingerprint"),
      createdAt: whole(fields, "createdAt", Number.MAX_SAFE_INTEGER),
      updatedAt: whole(fields, "updatedAt", Number.MAX_SAFE_INTEGER),
      attempts: whole(fields, "attempts", U32_MAX),
      state,
    };
  } catch (thrown) {
    if (thrown instanceof Malformed) throw corruptRecord(intentId, `malformed record: ${thrown.message}`);
    throw thrown;
  }
  const v = values;
  try {
    const plain = v.v === 1;
    const machine = engine.load(
      intentId,
      v.v === RECORD_VERSION || plain ? 1 : v.v,
      v.id,
      v.key,
      v.fingerprint,
      v.createdAt,
      v.updatedAt,
      v.attempts,
      v.state,
      lastStatus,
      uncertain,
    ) ?? refused();
    // The machine accepted these values as they are: they are the record's ids.
    const ids: RecordIds = { intentId, key: v.key, fingerprint: v.fingerprint, ...(plain ? { plain } : {}) };
    return { machine, ids, request };
  } catch (thrown) {
    throw fromThrown(thrown, { intentId });
  }
}

function decodeRequest(value: unknown): PersistedRequest {
  const fields = Fields.of(value, "request.", "request", malformed).only(REQUEST_FIELDS);
  const headersValue = fields.value("headers") ?? [];
  if (!Array.isArray(headersValue)) throw malformed("request.headers must be an array");
  const headers: [string, string][] = headersValue.map((pair: unknown) => {
    if (!Array.isArray(pair) || pair.length !== 2 || typeof pair[0] !== "string" || typeof pair[1] !== "string") {
      throw malformed("request.headers must be [name, value] string pairs");
    }
    return [pair[0], pair[1]];
  });
  const bodyValue = fields.value("body");
  let body: number[] | null = null;
  if (bodyValue !== undefined && bodyValue !== null) {
    if (!Array.isArray(bodyValue) || !bodyValue.every((n) => Number.isInteger(n) && n >= 0 && n <= 255)) {
      throw malformed("request.body must be an array of bytes");
    }
    body = bodyValue as number[];
  }
  return {
    method: required(fields.string("method"), "request.method"),
    url: required(fields.string("url"), "request.url"),
    headers,
    body,
  };
}

function required<T>(value: T | undefined, name: string): T {
  if (value === undefined) throw malformed(`missing field ${name}`);
  return value;
}

/** A whole number in `[0, max]`. */
function whole(fields: Fields, name: string, max: number): number {
  const value = required(fields.value(name), name);
  if (typeof value !== "number") throw malformed(`${name} must be a number, got ${typeName(value)}`);
  if (!Number.isInteger(value) || value < 0 || value > max) throw malformed(`${name} must be a whole number in range`);
  return value;
}

/** The machine's record (+ the persisted request) -> JSON text, fields in the stored order. */
export function encodeRecord(machine: Machine, ids: RecordIds, request: PersistedRequest | undefined): string {
  const lastStatus = machine.get(F_LAST_STATUS);
  return JSON.stringify({
    v: ids.plain ? 1 : RECORD_VERSION,
    id: ids.intentId,
    key: ids.key,
    fingerprint: ids.fingerprint,
    createdAt: machine.get(F_CREATED_AT),
    updatedAt: machine.get(F_UPDATED_AT),
    attempts: machine.get(F_TOTAL_ATTEMPTS),
    state: STATES[machine.get(F_STATE)],
    lastStatus: lastStatus === 0 ? null : lastStatus,
    uncertain: machine.get(F_UNCERTAIN) === 1,
    ...(request ? { request } : {}),
  });
}
