// Cross-origin diagnosis (loaded when first needed: lazy.ts; the send loop keeps the tally). A cross-origin answer shows the page only the CORS-safelisted headers
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

/** What one send's attempts said about the API's CORS set-up (kept by the send loop). */
export interface CorsTally {
  attempts: number;
  /** The previous attempt's status when that answer showed no header beyond the safelisted ones, else 0. */
  blindStatus: number;
  /** An answer repeated blind (`hidesHeaders`): the evidence of hidden headers. */
  hidden: boolean;
  /** Cross-origin attempts that failed below HTTP at once (a refused preflight fails so). */
  refused: number;
}

/** Looks at a retried answer from `origin` and updates `tally`. Returns the line the server needs
 *  when this answer is the evidence of hidden headers and the origin was not warned about yet (the
 *  caller emits its `cors` event then). */
export function observe(tally: CorsTally, response: Response, origin: string, replayHeaders: readonly string[], warned: Set<string>): string | undefined {
  let fix: string | undefined;
  if (hidesHeaders(response, tally.blindStatus)) {
    tally.hidden = true;
    const line = exposeLine(replayHeaders);
    if (warnOnce(origin, warned, line)) fix = line;
  }
  tally.blindStatus = exposesNothing(response) ? response.status : 0;
  return fix;
}

/** Why an exhausted send to `origin` could not finish, when its attempts say: it repeated an answer
 *  whose headers it hid, or refused every attempt at once. */
export function corsHint(tally: CorsTally, origin: string, headerName: string, replayHeaders: readonly string[]): string | undefined {
  if (tally.hidden) return hiddenHint(origin, exposeLine(replayHeaders));
  if (tally.attempts > 0 && tally.refused === tally.attempts) {
    return `${origin} refused every attempt at once: does its CORS preflight answer "${ALLOW_LINE(headerName)}"?`;
  }
  return undefined;
}
