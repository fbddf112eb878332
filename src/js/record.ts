// Intent records to and from the JSON text kept in storage. The fields, their numbers and JSON types
// are the contract table's (`RECORD_FIELDS`, `RECORD_KINDS`): decoding checks every field's TYPE and
// refuses unknown fields; the machine (`Engine.load`) then checks the VALUES. One place each way.

import { Fields, typeName } from "./fields.js";
import {
  type Engine,
  FIELD_FINGERPRINT,
  FIELD_ID,
  FIELD_KEY,
  FIELD_STATE,
  FIELD_VERSION,
  type IntentState,
  type Machine,
  NO_STATUS,
  RECORD_FIELDS,
  RECORD_KINDS,
  RECORD_READS,
  RECORD_SLOTS,
  RECORD_VERSION,
  STATES,
} from "./machine.js";
import { corruptRecord, fromThrown } from "./messages.js";
import { refused } from "./wasm.js";

// RECORD_VERSION (2) is written: a fingerprint keyed with the namespace's secret. Version 1 records
// (an unkeyed SHA-256 fingerprint) are still read: they are matched with the unkeyed hash and keep
// version 1 until retired (at most keyTtlMs).
/** Largest record text read back (a record is a few hundred bytes; a persisted body may be more). */
const MAX_RECORD_CHARS = 1 << 20;

/** A request stored with the intent, only with `persistRequest: true` (it may hold card data). */
export interface PersistedRequest {
  method: string;
  url: string;
  headers: [string, string][];
  /** Body bytes as sent; the length of a body of more than INLINE_BODY_MAX bytes, stored out of
   *  line (stored-request.ts); null for none. */
  body: number[] | number | null;
}

/** The largest body kept inside its record; a larger one gets a slot of its own (stored-request.ts), so
 *  that the record rewritten at each attempt, and every record `pending()` reads, stays small. */
export const INLINE_BODY_MAX = 1024;

/** The length of a persisted body stored out of line, if it is. */
export const outOfLine = (body: PersistedRequest["body"] | undefined): body is number => typeof body === "number";

/** What never changes in a record, kept by the driver so that encoding and views do not ask the
 *  machine again (each string getter crosses into wasm and copies). */
export interface RecordIds {
  intentId: string;
  key: string;
  fingerprint: string;
  /** A version-1 record: its fingerprint is the unkeyed SHA-256. */
  plain?: boolean;
  /** The W3C `traceparent` an observer keeps with the intent (observer.ts), once set: as stored,
   *  unchecked (the observer checks it). */
  trace?: string;
}

/** A stored intent: the machine's record, its ids, and the driver-only persisted request. */
export interface LoadedRecord {
  machine: Machine;
  ids: RecordIds;
  request: PersistedRequest | undefined;
}

/** Every field of a stored record: the machine's, and the driver's own `request` and `trace`. */
const STORED_FIELDS = [...RECORD_FIELDS, "request", "trace"];
const REQUEST_FIELDS = ["method", "url", "headers", "body"];

class Malformed extends Error {}
const malformed = (message: string | false) => new Malformed(message || "");

/** JSON text -> a validated record (a Machine made by the engine). Throws STORAGE naming the intent. */
export function decodeRecord(engine: Engine, intentId: string, text: string): LoadedRecord {
  // The machine's fields by FIELD_* number: strings, and the numbers (booleans as 1/0) it checks.
  const strings: string[] = [];
  const numbers = new Float64Array(RECORD_SLOTS);
  let request: PersistedRequest | undefined;
  let trace: unknown;
  try {
    if (text.length > MAX_RECORD_CHARS) throw malformed(__DEV__ && "record larger than 1 MiB");
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      throw malformed(__DEV__ && "not JSON");
    }
    const fields = Fields.of(parsed, "", "a record", malformed).only(STORED_FIELDS);
    RECORD_FIELDS.forEach((name, i) => {
      const kind = RECORD_KINDS[i]!;
      const value = fields.value(name);
      const slot = FIELD_VERSION + i;
      if ((value === undefined || value === null) && kind.endsWith("?")) numbers[slot] = kind === "number?" ? NO_STATUS : 0;
      else if (typeof value !== kind.replace("?", "")) {
        throw malformed(__DEV__ && (value === undefined ? `missing field ${name}` : `${name} must be a ${kind.replace("?", "")}, got ${typeName(value)}`));
      } else if (typeof value === "string") {
        strings[slot] = value;
        // The state crosses as its index (-1 for a name no build writes: the machine refuses it).
        if (slot === FIELD_STATE) numbers[slot] = STATES.indexOf(value as IntentState);
      } else numbers[slot] = Number(value);
    });
    const requestValue = fields.value("request");
    request = requestValue === undefined ? undefined : decodeRequest(requestValue);
    trace = fields.value("trace");
  } catch (thrown) {
    if (thrown instanceof Malformed) throw corruptRecord(intentId, __DEV__ && `malformed record: ${thrown.message}`);
    throw thrown;
  }
  try {
    const key = strings[FIELD_KEY]!;
    const fingerprint = strings[FIELD_FINGERPRINT]!;
    const machine =
      engine.load(intentId, strings[FIELD_ID]!, key, fingerprint, numbers) ?? refused();
    // The machine accepted these values as they are: they are the record's ids.
    const plain = numbers[FIELD_VERSION] === 1;
    const ids: RecordIds = { intentId, key, fingerprint, ...(plain ? { plain } : {}) };
    // Handed to the observer, which checks its form (observer.ts `ObservedIntent.trace`): a value that is
    // not a string is dropped here, the intent stays sendable.
    if (typeof trace === "string") ids.trace = trace;
    return { machine, ids, request };
  } catch (thrown) {
    throw fromThrown(thrown, { intentId });
  }
}

function decodeRequest(value: unknown): PersistedRequest {
  const fields = Fields.of(value, "request.", "request", malformed).only(REQUEST_FIELDS);
  const headersValue = fields.value("headers") ?? [];
  if (!Array.isArray(headersValue)) throw malformed(__DEV__ && "request.headers must be an array");
  const headers: [string, string][] = headersValue.map((pair: unknown) => {
    if (!Array.isArray(pair) || pair.length !== 2 || typeof pair[0] !== "string" || typeof pair[1] !== "string") {
      throw malformed(__DEV__ && "request.headers must be [name, value] string pairs");
    }
    return [pair[0], pair[1]];
  });
  const bodyValue = fields.value("body");
  let body: PersistedRequest["body"] = null;
  if (bodyValue !== undefined && bodyValue !== null) {
    // Bytes, or the length of a body stored out of line.
    if (Array.isArray(bodyValue) ? !bodyValue.every((n) => Number.isInteger(n) && n >= 0 && n <= 255) : !(Number.isSafeInteger(bodyValue) && (bodyValue as number) > INLINE_BODY_MAX)) {
      throw malformed(__DEV__ && "request.body must be an array of bytes or a length");
    }
    body = bodyValue as number[] | number;
  }
  return {
    method: required(fields.string("method"), __DEV__ && "request.method"),
    url: required(fields.string("url"), __DEV__ && "request.url"),
    headers,
    body,
  };
}

function required<T>(value: T | undefined, name: string | false): T {
  if (value === undefined) throw malformed(__DEV__ && `missing field ${name}`);
  return value;
}

/** The machine's record (+ the persisted request) -> JSON text: every field of `RECORD_FIELDS` in
 *  order, read from the machine by its `RECORD_READS` field, or from `ids` for the driver's own. An
 *  optional field is left out while it holds no value (0, false): a record whose newer fields are
 *  unset is still read by a build that does not know them. */
export function encodeRecord(machine: Machine, ids: RecordIds, request: PersistedRequest | undefined): string {
  // The driver's own fields, by FIELD_* number: the version it read, and the ids it keeps so that
  // encoding never copies a string out of wasm.
  const own: Record<number, string | number> = {
    [FIELD_VERSION]: ids.plain ? 1 : RECORD_VERSION,
    [FIELD_ID]: ids.intentId,
    [FIELD_KEY]: ids.key,
    [FIELD_FINGERPRINT]: ids.fingerprint,
  };
  const record: Record<string, unknown> = {};
  RECORD_FIELDS.forEach((name, i) => {
    const kind = RECORD_KINDS[i]!;
    const read = RECORD_READS[i]!;
    const n = read < 0 ? own[FIELD_VERSION + i]! : machine.get(read);
    // A string the machine keeps as a number is the state, named by STATES (the generator checks).
    if (n || !kind.endsWith("?")) {
      record[name] = read < 0 ? n : kind === "string" ? STATES[n as number] : kind.startsWith("boolean") ? n === 1 : n;
    }
  });
  if (ids.trace) record.trace = ids.trace;
  return JSON.stringify(request ? { ...record, request } : record);
}

/** What eviction needs of a stored record: its key and when it was last written, if it is retired
 *  (succeeded or failed); `undefined` for a pending or expired one, and for anything malformed
 *  (never evicted: corrupt entries are left alone). No machine is made: this is the cheap check. */
export function retiredStamp(text: string): { key: string; at: number } | undefined {
  if (text.length > MAX_RECORD_CHARS || !/"state":"(succeeded|failed)"/.test(text)) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return undefined;
  }
  const { state, key, updatedAt } = (parsed ?? {}) as Record<string, unknown>;
  if ((state !== "succeeded" && state !== "failed") || typeof key !== "string" || typeof updatedAt !== "number") return undefined;
  return { key, at: updatedAt };
}
