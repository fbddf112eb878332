// Lowercase hex: without state, so the parts loaded on first use may carry their own copy.

/** Lowercase hex of `bytes` (64 characters for a digest). */
export const hex = (bytes: Uint8Array): string => Array.from(bytes, (byte) => (byte < 16 ? "0" : "") + byte.toString(16)).join("");
