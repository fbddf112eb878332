// Cross-origin diagnosis. A cross-origin answer shows the page only the CORS-safelisted headers
// unless the server lists more in `Access-Control-Expose-Headers`: then the replay marker and
// `Retry-After` are invisible, a stored 500 is retried until the attempts run out and `Retry-After`
// is ignored, and nothing else tells the developer. Same-origin answers are never looked at.
//
// One answer cannot tell "not exposed" from "not sent": a fresh 500 from a correctly configured
// server shows the same safelisted headers as a replayed one from a server that hides its marker.
// So the client warns only on evidence: the same retried status, showing nothing beyond the
// safelisted headers, twice in a row for one key. A server that stores answers replays them so, and
// would mark the replay or send `Retry-After`. Gateway statuses (502, 503, 504) are left out: proxies
// and load balancers answer them during an outage, with no header of the app's.

/** The response headers every CORS answer shows (Fetch standard, "CORS-safelisted response-header name"). */
const SAFELISTED = ["cache-control", "content-language", "content-length", "content-type", "expires", "last-modified", "pragma"];

/** Statuses a gateway answers by itself: their repetition says nothing about the app's headers. */
const GATEWAY = [502, 503, 504];

/** The answer headers the client reads besides the replay markers. */
const READ_HEADERS = ["retry-after", "stripe-should-retry"];

/** "x-idempotent-replayed" as servers usually spell it: "X-Idempotent-Replayed". */
export const spelled = (name: string): string => name.replace(/(^|-)([a-z])/g, (_, dash: string, letter: string) => dash + letter.toUpperCase());

/** The line the server's CORS answers need for this client to read them: every header it reads
 *  (`replayHeaders`: the lower-case replay header names of its options). */
export const exposeLine = (replayHeaders: readonly string[]): string =>
  `Access-Control-Expose-Headers: ${[...replayHeaders, ...READ_HEADERS].map(spelled).join(", ")}`;

/** The line the server's preflight answers need for the key header to be sent at all. */
export const ALLOW_LINE = (headerName: string): string => `Access-Control-Allow-Headers: ${headerName}, Content-Type`;

/** Whether `response` is a cross-origin answer that shows no header beyond the safelisted ones. */
export function exposesNothing(response: Response): boolean {
  if (response.type !== "cors") return false;
  for (const [name] of response.headers) if (!SAFELISTED.includes(name)) return false;
  return true;
}

/** Whether a retried answer is evidence of hidden headers: it shows nothing beyond the safelisted
 *  ones and repeats the status of the key's previous attempt (`previous`: that attempt's status
 *  when it too showed nothing, else 0), a status a gateway does not answer by itself. */
export function hidesHeaders(response: Response, previous: number): boolean {
  return previous === response.status && !GATEWAY.includes(previous) && exposesNothing(response);
}

/** The origin of `url` when it is not the page's (undefined in Node, or same-origin). */
export function foreignOrigin(url: string): string | undefined {
  const page = (globalThis as { location?: { origin?: string } }).location?.origin;
  if (!page || page === "null") return undefined;
  const origin = new URL(url, page).origin;
  return origin === page ? undefined : origin;
}

/** What an origin that repeated a blind answer is told (`fix`: the line to add). */
export const hiddenHint = (origin: string, fix: string): string =>
  `${origin} repeated its answer without showing a header beyond the CORS-safelisted ones: if it marks replays or sends Retry-After, add "${fix}"`;

/** Warns once per origin (per client: `warned`) that answers from it repeat without showing a
 *  header beyond the safelisted ones, with the line to add (`fix`). Returns whether this call warned
 *  (the caller emits its event then). */
export function warnOnce(origin: string, warned: Set<string>, fix: string): boolean {
  if (warned.has(origin)) return false;
  warned.add(origin);
  console.warn(`idempotent-fetch: ${hiddenHint(origin, fix)}`);
  return true;
}
