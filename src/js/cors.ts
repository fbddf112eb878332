// Cross-origin diagnosis. A cross-origin answer shows the page only the CORS-safelisted headers
// unless the server lists more in `Access-Control-Expose-Headers`: then the replay marker and
// `Retry-After` are invisible, a stored 500 is retried until the attempts run out and `Retry-After`
// is ignored, and nothing else tells the developer. Same-origin answers are never looked at.

/** The response headers every CORS answer shows (Fetch standard, "CORS-safelisted response-header name"). */
const SAFELISTED = ["cache-control", "content-language", "content-length", "content-type", "expires", "last-modified", "pragma"];

/** The line the server's CORS answers need for this library to read them. */
export const EXPOSE_LINE = "Access-Control-Expose-Headers: Idempotent-Replayed, Retry-After";
/** The line the server's preflight answers need for the key header to be sent at all. */
export const ALLOW_LINE = (headerName: string): string => `Access-Control-Allow-Headers: ${headerName}, Content-Type`;

/** Whether `response` is a cross-origin answer that shows no header beyond the safelisted ones. */
export function exposesNothing(response: Response): boolean {
  if (response.type !== "cors") return false;
  for (const [name] of response.headers) if (!SAFELISTED.includes(name)) return false;
  return true;
}

/** The origin of `url` when it is not the page's (undefined in Node, or same-origin). */
export function foreignOrigin(url: string): string | undefined {
  const page = (globalThis as { location?: { origin?: string } }).location?.origin;
  if (!page || page === "null") return undefined;
  const origin = new URL(url, page).origin;
  return origin === page ? undefined : origin;
}

/** Warns once per origin (per client: `warned`) that a retried answer from it showed this page no
 *  header beyond the safelisted ones. It cannot tell "not exposed" from "not sent", hence the
 *  question. Returns whether this call warned (the caller emits its event then). */
export function warnOnce(origin: string, warned: Set<string>): boolean {
  if (warned.has(origin)) return false;
  warned.add(origin);
  console.warn(`idempotent-fetch: ${origin} shows no header beyond the CORS-safelisted ones: ${EXPOSE_LINE}?`);
  return true;
}
