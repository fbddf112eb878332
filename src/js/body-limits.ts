// The typed errors of reading a body, and the realm-safe type test: without state, so the core and the
// body part loaded on first use (body-objects.ts) share them (package/build.mjs, PURE_SOURCES).

import { describe } from "./describe.js";
import { IdempotentFetchError } from "./errors.js";

/** `value instanceof globalThis[name]`, false where the class does not exist. */
export function isA(value: unknown, name: string): boolean {
  const type = (globalThis as Record<string, unknown>)[name];
  return typeof type === "function" && value instanceof (type as abstract new (...args: never[]) => unknown);
}

/** The typed error of a body over the cap. */
export const tooLarge = (max: number) =>
  new IdempotentFetchError("BODY_TOO_LARGE", __DEV__ && `the body is larger than maxBodyBytes (${max} bytes)`);

/** The typed error of a body that failed while being read. */
export const unreadable = (thrown: unknown) => new IdempotentFetchError("INVALID_REQUEST", __DEV__ && `body cannot be read: ${describe(thrown)}`);
