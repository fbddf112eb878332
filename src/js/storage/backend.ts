// What every storage backend offers: the JSON text of intent records by intent id, in one
// namespace. Records are decoded and validated by the client (record.ts and the machine), never here.

/** A backend could not do what was asked. `unusable`: it cannot be used at all any more (blocked,
 *  closed, refused a write): the store falls back to memory with `reason`. Otherwise one read or
 *  delete failed and is reported as a STORAGE error. */
export class StorageFailure extends Error {
  /** How `isStorageFailure` recognises one, also from a part's own copy of this class (lazy.ts). */
  override name = "StorageFailure";
  constructor(
    readonly reason: string,
    readonly unusable: boolean,
  ) {
    super(reason);
  }
}

/** Whether `thrown` is a StorageFailure (the name decides: a backend loaded as a part throws its own
 *  copy of the class). */
export const isStorageFailure = (thrown: unknown): thrown is StorageFailure =>
  thrown instanceof Error && thrown.name === "StorageFailure";

/** The mark in front of a retired record's slot id (a control character, which no intent id holds):
 *  retired records live on their own shelf, so that listing the pending ones never reads them
 *  (docs/ARCHITECTURE.md, "Storage layout"). */
export const RETIRED = "\u0002";

/** The mark in front of the slot of a persisted request's body stored out of line (stored-request.ts):
 *  below RETIRED, so it is on neither shelf (listing records never reads a body), and unlike the
 *  secret's slot ("\u0001secret") in its second character, which no intent id can make. */
export const BODY = "\u0001:";

/** Which slots a listing covers: the pending shelf (every intent id), the retired shelf (ids behind
 *  RETIRED), or, `undefined`, the whole namespace (its fingerprint secret too). */
export type Shelf = "pending" | "retired" | undefined;

/** Whether the slot id `id` is on `shelf`. */
export const onShelf = (id: string, shelf: Shelf): boolean =>
  shelf === undefined || (shelf === "retired" ? id[0] === RETIRED : id[0]! > RETIRED);

/** The intent records of one namespace, by slot id (an intent id, RETIRED + an intent id, or the
 *  secret's). Every method may throw (reject with) a StorageFailure. */
export interface Backend {
  /** Whether retired records get their own shelf here (false: an app's storage keeps one slot per
   *  intent, and lists them all). */
  readonly shelves: boolean;
  /** The record text stored for `id`, if any. */
  get(id: string): Promise<string | undefined>;
  /** Stores (creates or replaces) the record text of `id`, and deletes the slots `drop` (the
   *  intent's slot on the other shelf, its body's) after it, in the same transaction where there is
   *  one; resolves once durable. */
  put(id: string, text: string, ...drop: string[]): Promise<void>;
  /** Deletes the records of `ids` (missing is fine). */
  delete(...ids: string[]): Promise<void>;
  /** Deletes the record of `id` only if `test` holds for its current text, with nothing written in
   *  between; with `moveTo`, the same text is stored there first. Resolves whether it did. */
  deleteIf(id: string, test: (text: string) => boolean, moveTo?: string): Promise<boolean>;
  /** Every readable `(slot id, record text)` of `shelf`. */
  all(shelf?: Shelf): Promise<[string, string][]>;
}

/** Web Storage keys: `idempotent-fetch:v1:<namespace>:<slot id>` (bump v1 if the layout changes). */
export const WEB_STORAGE_PREFIX = "idempotent-fetch:v1:";
