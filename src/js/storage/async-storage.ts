// The app's own storage (`storage: { get, put, delete, all }`): React Native's AsyncStorage, Electron,
// a server's Redis, or idempotent-fetch-client/file in Node. Its type and the options' test for it; the
// backend over it (custom.ts) is a part loaded on first use.

/**
 * A storage of your own for intent records: four async methods over text, by namespace and intent id.
 * Store texts exactly as given. A rejected `put` is taken as "this storage cannot be used": the
 * client continues in memory and says so (`storageFallback`, the `storagefallback` event;
 * `NOT_DURABLE` with `requireDurable`), carrying what `all` can still read. A rejected `get`,
 * `delete` or `all` is a `STORAGE` error of that operation. Intent ids may hold any character but
 * control characters; the namespace's fingerprint secret is stored under the id `"\u0001secret"`,
 * and a persisted request's body over 1 KiB (base64) under `"\u0001:"` + its intent id.
 */
export interface AsyncStorage {
  /** The text stored for `intentId` in `namespace`, or undefined. */
  get(namespace: string, intentId: string): Promise<string | undefined>;
  /** Stores (creates or replaces) it; resolves once it is durable. */
  put(namespace: string, intentId: string, text: string): Promise<void>;
  /** Deletes it (missing is fine). */
  delete(namespace: string, intentId: string): Promise<void>;
  /** Every `[intentId, text]` of `namespace` (skip what cannot be read). */
  all(namespace: string): Promise<[string, string][]>;
  /**
   * Optional, for a storage that several processes share (a folder, a database): waits for the lock
   * `name` of `namespace` across them and resolves with the function that releases it. Given, `begin`
   * reads, decides and writes an intent's key under it (and a new namespace's secret), so two
   * processes beginning one intent at once agree on one key; without it they may each mint one. Held
   * for one storage read and write: a lock its holder never releases (the process died) should be
   * taken over after a while. A rejection is taken as the storage failing: that `begin` goes on
   * without the lock, and its write meets the failure (the fallback to memory, or `NOT_DURABLE`).
   */
  lock?(namespace: string, name: string): Promise<() => void | Promise<void>>;
}

/** Whether `value` has the four methods of an AsyncStorage. */
export const isAsyncStorage = (value: unknown): value is AsyncStorage =>
  ["get", "put", "delete", "all"].every((m) => typeof (value as Record<string, unknown> | null)?.[m] === "function");
