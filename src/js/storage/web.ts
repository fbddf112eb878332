// localStorage / sessionStorage: one JSON text per intent under
// `idempotent-fetch:v1:<namespace>:<slot id>`, so one account's intents are never seen by another's
// (a retired record's slot id is RETIRED + its intent id: backend.ts).
// Unlike gloo's `LocalStorage::raw()` (which throws when storage is blocked), opening reports why it
// cannot be used, and the store falls back to memory.

import { describe, errorName, saying } from "../describe.js";
import { type Backend, onShelf, type Shelf, StorageFailure, WEB_STORAGE_PREFIX } from "./backend.js";
import { KEPT_IN_MEMORY } from "./idb.js";

/** What a backend needs of `Storage` (a real one, or a twin in tests). */
export type StorageArea = Pick<Storage, "getItem" | "setItem" | "removeItem" | "key" | "length">;

export class WebStorageBackend implements Backend {
  readonly shelves = true;
  private readonly prefix: string;

  constructor(
    private readonly area: StorageArea,
    namespace: string,
  ) {
    this.prefix = `${WEB_STORAGE_PREFIX}${namespace}:`;
  }

  /** Gets `localStorage`/`sessionStorage` and proves it can be written (Safari private mode and
   *  full disks throw only on write). Returns the reason it cannot be used, as a string. */
  static open(which: "localStorage" | "sessionStorage", namespace: string): WebStorageBackend | string {
    let area: unknown;
    try {
      // Reading `localStorage` itself throws SecurityError when storage is blocked.
      area = (globalThis as Record<string, unknown>)[which];
    } catch (thrown) {
      return `${errorName(thrown)}: ${which} is blocked${saying(thrown)}`;
    }
    if (area === undefined || area === null) return `${which} is not available here${KEPT_IN_MEMORY}`;
    const storage = area as StorageArea;
    const probe = `${WEB_STORAGE_PREFIX}probe`;
    try {
      storage.setItem(probe, "1");
      storage.removeItem(probe);
    } catch (thrown) {
      return `${errorName(thrown)}: ${which} cannot be written${saying(thrown)}`;
    }
    return new WebStorageBackend(storage, namespace);
  }

  async get(id: string): Promise<string | undefined> {
    let text: unknown;
    try {
      text = this.area.getItem(this.prefix + id);
    } catch (thrown) {
      throw new StorageFailure(__DEV__ ? `reading storage failed: ${describe(thrown)}` : "", false);
    }
    if (text === null || text === undefined) return undefined;
    if (typeof text !== "string") throw new StorageFailure(__DEV__ ? "reading storage failed: the value is not text" : "", false);
    return text;
  }

  async put(id: string, text: string, ...drop: string[]): Promise<void> {
    try {
      this.area.setItem(this.prefix + id, text);
    } catch (thrown) {
      throw new StorageFailure(
        `${errorName(thrown)}: writing to storage failed${saying(thrown)}${__DEV__ ? "; intents are kept in memory for this page" : ""}`,
        true,
      );
    }
    // In the same task as the write: the browser commits both together. A copy left behind (this
    // removal failing) is only ever older than the record just written.
    await this.delete(...drop).catch(() => {});
  }

  async delete(...ids: string[]): Promise<void> {
    try {
      for (const id of ids) this.area.removeItem(this.prefix + id);
    } catch (thrown) {
      throw new StorageFailure(__DEV__ ? `removing from storage failed: ${describe(thrown)}` : "", false);
    }
  }

  async deleteIf(id: string, test: (text: string) => boolean, moveTo?: string): Promise<boolean> {
    // Synchronous from the read to the removal: no other write of this page can come between.
    try {
      const text: unknown = this.area.getItem(this.prefix + id);
      if (typeof text !== "string" || !test(text)) return false;
      // Moved: written at its new slot before it leaves the old one.
      if (moveTo !== undefined) this.area.setItem(this.prefix + moveTo, text);
      this.area.removeItem(this.prefix + id);
      return true;
    } catch (thrown) {
      throw new StorageFailure(__DEV__ ? `removing from storage failed: ${describe(thrown)}` : "", false);
    }
  }

  async all(shelf?: Shelf): Promise<[string, string][]> {
    const out: [string, string][] = [];
    try {
      // Web Storage has no key ranges: every slot of the origin is looked at, but only the texts of
      // the shelf asked for are read.
      const slots: string[] = [];
      for (let i = 0; i < this.area.length; i++) {
        const slot = this.area.key(i);
        if (slot?.startsWith(this.prefix) && onShelf(slot.slice(this.prefix.length), shelf)) slots.push(slot);
      }
      for (const slot of slots) {
        const text: unknown = this.area.getItem(slot);
        if (typeof text === "string") out.push([slot.slice(this.prefix.length), text]);
      }
    } catch {
      // What could be read (a listing skips what it cannot read, like corrupt entries).
    }
    return out;
  }
}
