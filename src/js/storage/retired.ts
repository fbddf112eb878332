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
// this tab or another, is kept.

import { claimsDb, dropClaimsOf } from "./claims.js";
import type { Store } from "./store.js";

/** A stored text's key and write time if it is a retired record (record.ts `retiredStamp`). */
export type Stamp = (text: string) => { key: string; at: number } | undefined;

export class RetiredRecords {
  /** Retired records known to this page, oldest first (a Map keeps insertion order): id -> key. */
  private readonly known = new Map<string, string>();
  private scanned = false;
  /** Deletions run one after another, off the caller's path. */
  private work: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly store: Store,
    private readonly namespace: string,
    private readonly cap: number,
    private readonly stamp: Stamp,
    /** Whether this client's intents have claims (storage other tabs see). */
    private readonly claims: boolean,
  ) {
    store.onFull = () => this.relieve();
  }

  /** A record of `intentId` was written: retired with `key` (the newest now), or not retired. */
  written(intentId: string, key: string | undefined): void {
    this.known.delete(intentId);
    if (key === undefined) return;
    this.known.set(intentId, key);
    if (this.known.size > this.cap) void this.queue(() => this.trim());
  }

  /** The record of `intentId` was deleted. */
  removed(intentId: string): void {
    this.known.delete(intentId);
  }

  /** What a scan of the storage found: its retired records join as older than this page's own. */
  learn(entries: [string, string][]): void {
    const found: [string, string, number][] = [];
    for (const [id, text] of entries) {
      const stamp = this.known.has(id) ? undefined : this.stamp(text);
      if (stamp) found.push([id, stamp.key, stamp.at]);
    }
    found.sort((a, b) => a[2] - b[2]);
    const own = [...this.known];
    this.known.clear();
    for (const [id, key] of found) this.known.set(id, key);
    for (const [id, key] of own) this.known.set(id, key);
    this.scanned = true;
    if (this.known.size > this.cap) void this.queue(() => this.trim());
  }

  /** Waits for the deletions asked for so far (tests, and a refused write). */
  settled(): Promise<unknown> {
    return this.work;
  }

  /** A write was refused: deletes the oldest half of the retired records (scanning the storage first
   *  if this page has not); resolves whether any was deleted. */
  private relieve(): Promise<boolean> {
    return this.queue(async () => {
      if (!this.scanned) this.learn([...(await this.store.all("retired")), ...(await this.store.all())]);
      return (await this.evict(Math.ceil(this.known.size / 2))) > 0;
    });
  }

  /** Deletes the oldest retired records past the cap (counted when it runs: others may have gone). */
  private trim(): Promise<number> {
    return this.evict(this.known.size - this.cap);
  }

  private queue<T>(task: () => Promise<T>): Promise<T> {
    const run = this.work.then(task);
    this.work = run.catch(() => {});
    return run;
  }

  /** Deletes the `count` oldest retired records still retired with the key known (claims first: a
   *  claim never outlives its record); resolves how many records were deleted. */
  private async evict(count: number): Promise<number> {
    const oldest: [string, string][] = [];
    for (const entry of this.known) {
      if (oldest.length >= count) break;
      oldest.push(entry);
    }
    if (oldest.length === 0) return 0;
    for (const [id] of oldest) this.known.delete(id);
    const db = this.claims && (await claimsDb());
    if (db) await dropClaimsOf(db, this.namespace, oldest);
    let deleted = 0;
    for (const [id, key] of oldest) {
      const still = (text: string) => this.stamp(text)?.key === key;
      if (await this.store.deleteIf(id, still).catch(() => false)) deleted += 1;
    }
    return deleted;
  }
}
