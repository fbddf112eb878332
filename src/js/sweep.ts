// What deletes stored records in the background: the sweep of a namespace's stored intents (the
// answered and expired ones past `keyTtlMs` deleted, stale pending ones marked expired: `client.sweep()`,
// and once per client when the page is idle after its first send), and the bound of its retired
// records (storage/retired.ts: the oldest past the cap, or half of them when a write is refused). A
// part loaded on first use (lazy.ts): the quick start's first download does not have it, and a page
// fetches it when idle after its first send. It shares no module state with
// the entry: the entry's functions it works with come in one object (`SweepKit`, made in client.ts).

import type { ClientCore, saveRecord, storedEntries } from "./core.js";
import { F_UPDATED_AT, SWEEP_EXPIRED, SWEEP_KEEP, SWEEP_REMOVE } from "./machine.js";
import type { discardIntent } from "./operation.js";
import type { decodeRecord, retiredStamp } from "./record.js";
import type { claimsDb, dropClaimsOf } from "./storage/claims.js";
import type { RetiredRecords } from "./storage/retired.js";

/** The entry's functions this part uses, by their names there (`whenIdle` is client.ts `idle`).
 *  Each name is one the bundles shorten (package/build.mjs `DRIVER_PRIVATE`): no other property may
 *  have it. */
export interface SweepKit {
  decodeRecord: typeof decodeRecord;
  retiredStamp: typeof retiredStamp;
  discardIntent: typeof discardIntent;
  saveRecord: typeof saveRecord;
  storedEntries: typeof storedEntries;
  claimsDb: typeof claimsDb;
  dropClaimsOf: typeof dropClaimsOf;
  whenIdle(): Promise<void>;
}

/** Records the background sweep decodes between two yields to the page: a few ms of work. */
const SWEEP_SLICE = 64;

/** The sweep. `background`: yields to the page (`whenIdle`) every SWEEP_SLICE records, and sweeps
 *  only what was stored before `madeAt`, when the client was made (what a reload finds: this page's
 *  own records are not stale so soon, and an app's own `sweep()` call decides about them). */
export async function sweepIntents(
  kit: SweepKit,
  core: ClientCore,
  background: boolean,
  madeAt: number,
): Promise<{ removed: number; expired: number }> {
  const engine = await core.engine();
  let removed = 0;
  let expired = 0;
  const pendingShelf = await kit.storedEntries(core);
  const all = [...pendingShelf, ...(await kit.storedEntries(core, "retired"))];
  // The scan also tells the retired records' bound what is stored (oldest are deleted past the cap).
  learnRetired(kit, core.retired, all);
  for (const [index, [id, text]] of all.entries()) {
    if (background && index > 0 && index % SWEEP_SLICE === 0) await kit.whenIdle();
    // A retired record an earlier version left on the pending shelf moves to the retired one.
    if (index < pendingShelf.length && kit.retiredStamp(text)) await core.store.shelve(id, text).catch(() => false);
    let loaded;
    try {
      loaded = kit.decodeRecord(engine, id, text);
    } catch {
      continue; // corrupt entries are left alone (never silently overwritten)
    }
    const { machine, ids, request } = loaded;
    try {
      if (background && machine.get(F_UPDATED_AT) >= madeAt) continue;
      const verdict = engine.sweep(machine, Date.now());
      if (verdict === SWEEP_REMOVE) {
        // Not when another tab claimed a new key for this id meanwhile (this tab's view is stale).
        if (await kit.discardIntent(core, id, ids.key)) removed += 1;
      } else if (verdict === SWEEP_EXPIRED) {
        await kit.saveRecord(core, machine, ids, request);
        expired += 1;
        core.listeners.emit({ type: "expired", intentId: id, key: ids.key });
      } else if (verdict !== SWEEP_KEEP) {
        continue;
      }
    } finally {
      machine.free();
    }
  }
  return { removed, expired };
}

/** What a scan of the storage found: its retired records join `retired` as older than the page's own. */
function learnRetired(kit: SweepKit, retired: RetiredRecords, entries: [string, string][]): void {
  const found: [string, string, number][] = [];
  for (const [id, text] of entries) {
    const stamp = retired.known.has(id) ? undefined : retired.stamp(text);
    if (stamp) found.push([id, stamp.key, stamp.at]);
  }
  found.sort((a, b) => a[2] - b[2]);
  const own = [...retired.known];
  retired.known.clear();
  for (const [id, key] of found) retired.known.set(id, key);
  for (const [id, key] of own) retired.known.set(id, key);
  retired.scanned = true;
  if (retired.known.size > retired.cap) void retired.queue(() => trimRetired(kit, retired));
}

/** A write was refused: deletes the oldest half of the retired records (scanning the storage first
 *  if this page has not); resolves whether any was deleted. */
export async function relieveRetired(kit: SweepKit, retired: RetiredRecords): Promise<boolean> {
  if (!retired.scanned) learnRetired(kit, retired, [...(await retired.store.all("retired")), ...(await retired.store.all())]);
  return (await evict(kit, retired, Math.ceil(retired.known.size / 2))) > 0;
}

/** Deletes the oldest retired records past the cap (counted when it runs: others may have gone). */
export function trimRetired(kit: SweepKit, retired: RetiredRecords): Promise<number> {
  return evict(kit, retired, retired.known.size - retired.cap);
}

/** Deletes the `count` oldest retired records still retired with the key known (claims first: a
 *  claim never outlives its record); resolves how many records were deleted. */
async function evict(kit: SweepKit, retired: RetiredRecords, count: number): Promise<number> {
  const oldest: [string, string][] = [];
  for (const entry of retired.known) {
    if (oldest.length >= count) break;
    oldest.push(entry);
  }
  if (oldest.length === 0) return 0;
  for (const [id] of oldest) retired.known.delete(id);
  const db = retired.claims && (await kit.claimsDb());
  if (db) await kit.dropClaimsOf(db, retired.namespace, oldest);
  let deleted = 0;
  for (const [id, key] of oldest) {
    const still = (text: string) => retired.stamp(text)?.key === key;
    if (await retired.store.deleteIf(id, still).catch(() => false)) deleted += 1;
  }
  return deleted;
}
