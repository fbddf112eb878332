// What every storage backend offers: the JSON text of intent records by intent id, in one
// namespace. Records are decoded and validated by the client (record.ts and the machine), never here.

/** A backend could not do what was asked. `unusable`: it cannot be used at all any more (blocked,
 *  closed, refused a write): the store falls back to memory with `reason`. Otherwise one read or
 *  delete failed and is reported as a STORAGE error. */
export class StorageFailure extends Error {
  constructor(
    readonly reason: string,
    readonly unusable: boolean,
  ) {
    super(reason);
  }
}

/** The intent records of one namespace. Every method may throw (reject with) a StorageFailure. */
export interface Backend {
  /** The record text stored for `intentId`, if any. */
  get(intentId: string): Promise<string | undefined>;
  /** Stores (creates or replaces) the record text of `intentId`; resolves once it is durable. */
  put(intentId: string, text: string): Promise<void>;
  /** Deletes the record of `intentId` (missing is fine). */
  delete(intentId: string): Promise<void>;
  /** Deletes the record of `intentId` only if `test` holds for its current text, with nothing
   *  written in between; resolves whether it did. */
  deleteIf(intentId: string, test: (text: string) => boolean): Promise<boolean>;
  /** Every `(intent id, record text)` of the namespace that can be read. */
  all(): Promise<[string, string][]>;
}

/** Web Storage keys: `idempotent-fetch:v1:<namespace>:<intent id>` (bump v1 if the layout changes). */
export const WEB_STORAGE_PREFIX = "idempotent-fetch:v1:";
