// The retired (succeeded, failed) records of one client's namespace, oldest first, so that they
// have a bounded footprint. A retired record only lets a second click or a reload within keyTtlMs
// replay or refuse; keeping every one until keyTtlMs filled localStorage's quota, after which no key
// was durable any more. So: past `cap` retired records, the oldest are deleted (with their claims),
// and when a write is refused (quota), the oldest half are deleted before the store gives up on its
// storage. Pending and expired records are never deleted here, nor anything outside this namespace.
//
// What is known: every retired write of this page as it happens, and what a scan of the storage
// found (the background sweep's, or the one a refused write makes), merged as older than the page's
// own. Deletion re-checks the stored text (`Store.deleteIf`): a record begun again meanwhile, in
// this tab or another, is kept. What deletes is the sweep's part (sweep.ts), loaded when a
// deletion is first asked for; the bookkeeping of each write is here, in the entry.

import type { SweepKit } from "../sweep.js";
import { sweepPart } from "../lazy.js";
import type { Store } from "./store.js";

/** A stored text's key and write time if it is a retired record (record.ts `retiredStamp`). */
export type Stamp = (text: string) => { key: string; at: number } | undefined;

/** The part that deletes retired records (sweep.ts). */
type Deleter = typeof import("../sweep.js");

export class RetiredRecords {
  /** Retired records known to this page, oldest first (a Map keeps insertion order): id -> key. */
  readonly known = new Map<string, string>();
  /** Whether a scan of the storage joined `known` (the sweep's, or a refused write's). */
  scanned = false;
  /** Deletions run one after another, off the caller's path. */
  private work: Promise<unknown> = Promise.resolve();

  constructor(
    readonly store: Store,
    readonly namespace: string,
    readonly cap: number,
    readonly stamp: Stamp,
    /** Whether this client's intents have claims (storage other tabs see). */
    readonly claims: boolean,
    /** The entry's functions the deleting part uses. */
    private readonly kit: SweepKit,
  ) {
    store.onFull = () => this.queue((part) => part.relieveRetired(this.kit, this));
  }

  /** A record of `intentId` was written: retired with `key` (the newest now), or not retired. */
  written(intentId: string, key: string | undefined): void {
    this.known.delete(intentId);
    if (key === undefined) return;
    this.known.set(intentId, key);
    if (this.known.size > this.cap) void this.queue((part) => part.trimRetired(this.kit, this));
  }

  /** The record of `intentId` was deleted. */
  removed(intentId: string): void {
    this.known.delete(intentId);
  }

  /** Waits for the deletions asked for so far (tests, and a refused write). */
  settled(): Promise<unknown> {
    return this.work;
  }

  /** Runs `task` with the deleting part once the deletions asked for before it are done. */
  queue<T>(task: (part: Deleter) => Promise<T>): Promise<T> {
    const run = this.work.then(async () => task(await sweepPart()));
    this.work = run.catch(() => {});
    return run;
  }
}
