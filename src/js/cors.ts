// Cross-origin diagnosis (loaded when first needed: lazy.ts; the send loop keeps the tally). A cross-origin answer shows the page only the CORS-safelisted headers
// unless the server lists more in `Access-Control-Expose-Headers`: then the replay marker and
// `Retry-After` are invisible, a stored 500 is retried until the attempts run out and `Retry-After`
// is ignored. Same-origin answers are never looked at.
//
// An answer cannot tell "not exposed" from "not sent": a 409 without `Retry-After`, a fresh 500 from
// a server that stores no 5xx, and a stored 500 replayed without a marker all show the page the same
// safelisted headers as an answer whose headers are hidden, and all are legitimate. Repetition proves
// nothing either (a handler can keep failing). So the `cors` event and the console warning need
// evidence that a header was sent and hidden: the server's own account of the answer (its key status,
// "the response a replay would give") names a header this client reads that the page's answer with
// the same status did not show. An exhausted send that kept getting one blind answer says in its
// message, as a condition, what the server's CORS answers would need; it warns no one.

import { warn } from "./mode.js";
import { IN_FLIGHT_STATUSES } from "./machine.js";

/** The response headers every CORS answer shows (Fetch standard, "CORS-safelisted response-header name"). */
const SAFELISTED = ["cache-control", "content-language", "content-length", "content-type", "expires", "last-modified", "pragma"];

/** Statuses a gateway answers by itself: their repetition says nothing about the app's headers. */
const GATEWAY = [502, 503, 504];

/** The answer headers the client reads besides the replay markers. */
const READ_HEADERS = ["retry-after", "stripe-should-retry"];

/** "x-idempotent-replayed" as servers usually spell it: "X-Idempotent-Replayed". */
export const spelled = (name: string): string => name.replace(/(^|-)([a-z])/g, (_, dash: string, letter: string) => dash + letter.toUpperCase());

/** Every header name this client reads, lower case, each once (`replayHeaders`: the replay header
 *  names of its options; an app's list may repeat a default spelling). */
const readHeaders = (replayHeaders: readonly string[]): string[] => [...new Set([...replayHeaders, ...READ_HEADERS].map((name) => name.toLowerCase()))];

/** The line the server's CORS answers need for this client to read them: every header it reads. */
export const exposeLine = (replayHeaders: readonly string[]): string => `Access-Control-Expose-Headers: ${readHeaders(replayHeaders).map(spelled).join(", ")}`;

/** The line the server's preflight answers need for the key header to be sent at all. */
export const ALLOW_LINE = (headerName: string): string => `Access-Control-Allow-Headers: ${headerName}, Content-Type`;

/** What one send's attempts showed of the API's CORS set-up (kept by the send loop). */
export interface CorsTally {
  attempts: number;
  /** Cross-origin attempts that failed below HTTP at once (a refused preflight fails so). */
  refused: number;
  /** The last attempt's answer when it was a CORS answer: its status and the header names the page
   *  could read; undefined after an attempt without an answer. */
  last: { status: number; shown: string[] } | undefined;
  /** A retried status the key got twice in a row showing no header beyond the safelisted ones, else 0. */
  repeatedBlind: number;
}

/** Notes a cross-origin answer in `tally` (any answer that did not finish the send). */
export function observe(tally: CorsTally, response: Response): void {
  if (response.type !== "cors") {
    tally.last = undefined;
    return;
  }
  const shown = [...response.headers.keys()];
  const blind = shown.every((name) => SAFELISTED.includes(name));
  const previous = tally.last;
  const previousBlind = previous !== undefined && previous.shown.every((name) => SAFELISTED.includes(name));
  if (blind && previousBlind && previous.status === response.status) tally.repeatedBlind = response.status;
  tally.last = { status: response.status, shown };
}

/**
 * The evidence of hidden headers: the server's account of its stored answer for the key (`status`,
 * the header names it lists, `stored`) names headers this client reads that the page's last answer,
 * with the same status, did not show. Then it warns once per origin (per client: `warned`) and
 * returns the line the server's CORS answers need (the caller emits its `cors` event).
 */
export function observeStored(
  tally: CorsTally,
  status: number,
  stored: readonly string[],
  origin: string,
  replayHeaders: readonly string[],
  warned: Set<string>,
): string | undefined {
  const last = tally.last;
  if (last === undefined || last.status !== status) return undefined;
  const read = readHeaders(replayHeaders);
  const hidden = [...new Set(stored.map((name) => name.toLowerCase()))].filter((name) => read.includes(name) && !last.shown.includes(name));
  if (!hidden.length || warned.has(origin)) return undefined;
  warned.add(origin);
  const fix = exposeLine(replayHeaders);
  warn(
    __DEV__ &&
      `${origin} hides ${hidden.map(spelled).join(", ")} from this page: its key status says its ${status} answer carries ${hidden.length > 1 ? "them" : "it"}, the answer this page got showed ${hidden.length > 1 ? "none" : "no such header"}; add "${fix}"`,
    "cors",
  );
  return fix;
}

/** What an exhausted send to `origin` may owe to CORS, when its attempts say: every one was refused
 *  at once, or one retried answer came back blind twice (said as a condition: the answers may
 *  simply carry nothing to expose). In-flight answers are left out: a hidden `Retry-After` costs
 *  them pacing, not the intent, and their message says what they mean. */
export function corsHint(tally: CorsTally, origin: string, headerName: string, replayHeaders: readonly string[]): string | undefined {
  if (!__DEV__) return undefined; // said in the development build's message only
  if (tally.attempts > 0 && tally.refused === tally.attempts) {
    return `${origin} refused every attempt at once: does its CORS preflight answer "${ALLOW_LINE(headerName)}"?`;
  }
  const status = tally.repeatedBlind;
  if (status && !GATEWAY.includes(status) && !IN_FLIGHT_STATUSES.includes(status)) {
    return `${origin} answered ${status} again without showing this page a header beyond the CORS-safelisted ones: if it marks replayed answers or sends Retry-After, its CORS answers need "${exposeLine(replayHeaders)}"`;
  }
  return undefined;
}
