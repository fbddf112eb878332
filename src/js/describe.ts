// What a thrown JavaScript value says, for messages: functions without state, so the parts loaded on
// first use (lazy.ts) may carry their own copy.

/** Describes whatever JavaScript threw, for messages. */
export function describe(thrown: unknown): string {
  if (thrown instanceof Error) return thrown.message;
  return typeof thrown === "string" ? thrown : "unknown JavaScript error";
}

/** What `thrown` says, in parentheses, for a reason to fall back to memory: the development build
 *  only (src/js/mode.ts); the production build's reason names the error and what failed. */
export function saying(thrown: unknown): string {
  return __DEV__ ? ` (${describe(thrown)})` : "";
}

/** The `name` of a thrown `DOMException`/`Error` (`"QuotaExceededError"`, `"SecurityError"`, ...), or "". */
export function errorName(thrown: unknown): string {
  try {
    const name = (thrown as { name?: unknown } | null)?.name;
    return typeof name === "string" ? name : "";
  } catch {
    return "";
  }
}
