// `idempotent-fetch-client/file`: durable intent records for Node (a CLI, a job, an AI agent's tool calls), an
// AsyncStorage over one folder. Crash-safe: each record is written to a temporary file, flushed to
// disk (fsync), then renamed over the old one (and the folder flushed), so a process killed at any
// point leaves the old record or the new one, never half of one. Two processes: every write and
// delete of a namespace holds a lock file that names its owner's process, and so does each `begin`'s
// create-or-resume decision (`lock`, a file per intent); one left by a killed process (its pid gone)
// or older than LOCK_STALE_MS is taken over, so it cannot block forever.
// Type imports only from the core: this entry carries no copy of the client.
/**
 * `idempotent-fetch-client/file` (Node only): {@link fileStorage}, durable intent records in a folder, for
 * CLIs, jobs and agents' tool calls: `new IdempotentClient({ storage: fileStorage({ directory }) })`.
 *
 * @module idempotent-fetch-client/file
 */

import { createHash, randomBytes } from "node:crypto";
import { promises as fs } from "node:fs";
import path from "node:path";

import type { AsyncStorage } from "../storage/async-storage.js";

/** Options of `fileStorage`. */
export interface FileStorageOptions {
  /** The folder that holds the records (created if missing), one subfolder per namespace. */
  directory: string;
}

/** A lock older than this is taken over even if its process seems alive (a reused pid). */
const LOCK_STALE_MS = 10_000;
/** The format of a record file: `{ format, intentId, text }`. */
const FORMAT = "idempotent-fetch-file-v1";
const SUFFIX = ".json";

/** A file storage for `new IdempotentClient({ storage: fileStorage({ directory }) })`. */
export function fileStorage(options: FileStorageOptions): AsyncStorage {
  if (typeof options?.directory !== "string" || options.directory.length === 0) throw new TypeError("fileStorage: options.directory must be a folder path");
  const root = path.resolve(options.directory);
  const folder = (namespace: string) => path.join(root, encodeURIComponent(namespace));
  // The intent id hashed: any id (any length, any character) is one safe file name.
  const file = (namespace: string, intentId: string) =>
    path.join(folder(namespace), createHash("sha256").update(intentId).digest("hex") + SUFFIX);

  /** The record text of a file, checked: ours (format), for this id. Throws for anything else. */
  const decode = (content: string, where: string, intentId?: string): { intentId: string; text: string } => {
    let parsed: unknown;
    try {
      parsed = JSON.parse(content);
    } catch {
      throw new Error(`${where} is corrupt or truncated (not JSON); left as it is`);
    }
    const record = parsed as { format?: unknown; intentId?: unknown; text?: unknown };
    if (record?.format !== FORMAT || typeof record.intentId !== "string" || typeof record.text !== "string") {
      throw new Error(`${where} is not an idempotent-fetch record file; left as it is`);
    }
    if (intentId !== undefined && record.intentId !== intentId) throw new Error(`${where} holds another intent's record; left as it is`);
    return { intentId: record.intentId, text: record.text };
  };

  return {
    async get(namespace, intentId) {
      const where = file(namespace, intentId);
      let content: string;
      try {
        content = await fs.readFile(where, "utf8");
      } catch (thrown) {
        if ((thrown as NodeJS.ErrnoException).code === "ENOENT") return undefined;
        throw thrown;
      }
      return decode(content, where, intentId).text;
    },

    async put(namespace, intentId, text) {
      await fs.mkdir(folder(namespace), { recursive: true });
      await withLock(folder(namespace), async () => {
        const target = file(namespace, intentId);
        const temporary = `${target}.${process.pid}.${randomBytes(6).toString("hex")}.tmp`;
        const handle = await fs.open(temporary, "wx", 0o600);
        try {
          await handle.writeFile(JSON.stringify({ format: FORMAT, intentId, text }));
          await handle.sync();
        } finally {
          await handle.close();
        }
        try {
          await fs.rename(temporary, target);
        } catch (thrown) {
          await fs.rm(temporary, { force: true });
          throw thrown;
        }
        await syncFolder(folder(namespace));
      });
    },

    async delete(namespace, intentId) {
      try {
        await withLock(folder(namespace), async () => {
          await fs.rm(file(namespace, intentId), { force: true });
          await syncFolder(folder(namespace));
        });
      } catch (thrown) {
        if ((thrown as NodeJS.ErrnoException).code !== "ENOENT") throw thrown; // no folder: nothing stored
      }
    },

    // Separate from the writes' `.lock` (`put` runs while it is held): one file per lock name.
    async lock(namespace, name) {
      await fs.mkdir(folder(namespace), { recursive: true });
      return lockFile(path.join(folder(namespace), `.lock-${createHash("sha256").update(name).digest("hex").slice(0, 32)}`));
    },

    async all(namespace) {
      let names: string[];
      try {
        names = await fs.readdir(folder(namespace));
      } catch (thrown) {
        if ((thrown as NodeJS.ErrnoException).code === "ENOENT") return [];
        throw thrown;
      }
      const out: [string, string][] = [];
      for (const name of names.filter((n) => /^[0-9a-f]{64}\.json$/.test(n))) {
        const where = path.join(folder(namespace), name);
        try {
          const record = decode(await fs.readFile(where, "utf8"), where);
          // A file copied under another id's name is not that id's record.
          if (file(namespace, record.intentId) === where) out.push([record.intentId, record.text]);
        } catch {
          // Unreadable, corrupt or foreign: skipped here (never overwritten); `get` reports it.
        }
      }
      return out;
    },
  };
}

/** Flushes a folder's entries (the rename) to disk; not every platform can open a folder for it. */
async function syncFolder(folder: string): Promise<void> {
  const handle = await fs.open(folder, "r").catch(() => undefined);
  if (!handle) return;
  try {
    await handle.sync().catch(() => {});
  } finally {
    await handle.close();
  }
}

/** Runs `work` holding `<folder>/.lock`. */
async function withLock<T>(folder: string, work: () => Promise<T>): Promise<T> {
  const release = await lockFile(path.join(folder, ".lock"));
  try {
    return await work();
  } finally {
    await release();
  }
}

/** Takes the lock file `lock` (created exclusively; it holds the owner's pid) and resolves with its
 *  release. A lock whose process is gone, or older than LOCK_STALE_MS, is removed and taken. */
async function lockFile(lock: string): Promise<() => Promise<void>> {
  const token = `${process.pid} ${randomBytes(8).toString("hex")}`;
  for (let wait = 2; ; wait = Math.min(wait * 2, 100)) {
    try {
      await fs.writeFile(lock, token, { flag: "wx", mode: 0o600 });
      break;
    } catch (thrown) {
      if ((thrown as NodeJS.ErrnoException).code !== "EEXIST") throw thrown;
    }
    if (await stale(lock)) {
      // Renamed away first, so two processes finding it stale cannot both remove a fresh one.
      const moved = `${lock}.${token.replace(" ", ".")}.stale`;
      if (await fs.rename(lock, moved).then(() => true, () => false)) await fs.rm(moved, { force: true });
      continue;
    }
    await new Promise((resolve) => setTimeout(resolve, wait));
  }
  // Only our own lock (one taken over as stale meanwhile is no longer ours).
  return async () => {
    if ((await fs.readFile(lock, "utf8").catch(() => "")) === token) await fs.rm(lock, { force: true });
  };
}

/** Whether the lock file's process is gone or the lock is older than LOCK_STALE_MS. */
async function stale(lock: string): Promise<boolean> {
  const [content, info] = await Promise.all([fs.readFile(lock, "utf8").catch(() => ""), fs.stat(lock).catch(() => undefined)]);
  if (!info) return false; // just released: try again
  if (Date.now() - info.mtimeMs > LOCK_STALE_MS) return true;
  const pid = Number(content.split(" ")[0]);
  if (!Number.isInteger(pid) || pid <= 0) return Date.now() - info.mtimeMs > 1_000; // being written
  try {
    process.kill(pid, 0);
    return false;
  } catch (thrown) {
    return (thrown as NodeJS.ErrnoException).code === "ESRCH";
  }
}
