// The eight cases: what the client relies on a server for (docs/ARCHITECTURE.md, "The protocol,
// server side"), each checked from outside with requests of its own, each under a fresh key from the
// CSPRNG. A case says PASS only on evidence, FAIL with what it saw and the fix, SKIP with the reason
// when nothing sent from outside can show it, INCONCLUSIVE when its requests did not exercise what it
// checks (and how to make them). It judges by what the server did: one effect, one answer replayed.
import { ALLOW_LINE, exposeLine, spelled } from "../cors.js";
import type { CheckOptions } from "./args.js";
import { type Answer, burst, describe, freshKey, get, longKey, NoAnswer, post, preflight, sameAnswer, settle } from "./http.js";

/** A case's verdict. */
export type Verdict = "PASS" | "FAIL" | "SKIP" | "INCONCLUSIVE";

/** One row of the report. */
export interface Row {
  id: number;
  name: string;
  verdict: Verdict;
  /** What the check saw, on one line. */
  seen: string;
  /** What to change (FAIL), or how to let the check look (SKIP, INCONCLUSIVE); empty on PASS. */
  fix: string;
  /** What the client copes with but would rather not meet, with what to do; empty when nothing. */
  warning: string;
}

/** The endpoint could not be checked at all (no answer, or the request it was given is refused). */
export class CannotCheck extends Error {
  override name = "CannotCheck";
}

type Outcome = Omit<Row, "id" | "name">;
const pass = (seen: string, warning = ""): Outcome => ({ verdict: "PASS", seen, fix: "", warning });
const fail = (seen: string, fix: string): Outcome => ({ verdict: "FAIL", seen, fix, warning: "" });
const skip = (seen: string, fix = ""): Outcome => ({ verdict: "SKIP", seen, fix, warning: "" });
const inconclusive = (seen: string, fix: string): Outcome => ({ verdict: "INCONCLUSIVE", seen, fix, warning: "" });

/** Requests sent at once with one key in case 3. */
export const CONCURRENT = 8;
/** Statuses that say "this key is in flight, retry": 409 and WebDAV's 423, both retried by the client. */
const IN_FLIGHT = [409, 423];
/** Refusals that are not a second effect: the client retries each with the same key (with or
 *  without `Retry-After`), so a concurrent duplicate refused so did no harm. */
const REFUSALS = [409, 423, 425, 429, 502, 503];
/** How long the first answer of case 3 must take for its duplicates, all sent before it came back,
 *  to have been at the server while the first request was at work (below it they may have been
 *  handled one after another). */
const HELD_MS = 100;
/** Bursts case 3 sends at most, each under a fresh key, until one overlaps at the server. */
const BURSTS = 3;
/** How long case 3 waits for the key to leave flight after the burst. */
const SETTLE_MS = 20_000;
/** A JSON body the endpoint should refuse (case 4): a string where requests are objects. */
const REFUSED_BODY = JSON.stringify("idempotent-fetch-client check: a request this endpoint should refuse");
/** The long key of case 5: the most the client and the IETF draft's servers commonly accept. */
const LONG_KEY_LENGTH = 255;

const MARKER = spelled("idempotent-replayed");
const FIX = {
  store: `Store the first answer (status and body) with the key and send it back byte for byte for the same key and request, with ${MARKER}: true`,
  marker: `Mark every replayed answer with ${MARKER}: true: the client finishes an intent on it, whatever the status`,
  freshMarked: `Mark only replays: an answer the request itself produced carries no ${MARKER}`,
  fingerprint: "Store a fingerprint of the request (method, path, body) with the key and answer 422 when the key comes with another request",
  status422: "Answer 422 when the key comes with another request (the IETF draft; the client reports it as KEY_MISMATCH, a bug to fix, not a retry). A 409 here is retried by the client until it gives up",
  lock: "Take the key before the work, atomically (insert the key row under its unique constraint in the work's transaction, or hold a lock): a concurrent duplicate gets 409 with Retry-After, or waits and gets the replay. The client sends one intent's attempts one at a time, in every tab, so it makes such duplicates only when an attempt's answer is lost; nothing on its side can make a second run of the work safe",
  retryAfter: "Send Retry-After (seconds) with a refusal of a key in flight: the client waits that long instead of its own backoff",
  replayStatus: "This server replays with 409 and the first answer's body: give the client replayStatus: 409, which takes such an answer for the replay it is (without it, the client takes the 409 for \"in flight\" and retries until it gives up); or mark replays with Idempotent-Replayed: true and keep their own status",
  overlap: "Make the work slower than the requests' arrival, so the duplicates meet the key in flight: a slower handler on a test instance, or a delay header if the server has one (the reference server with --enable-faults: --header \"X-Fault: latency=300\")",
  duplicates: "Answer a concurrent duplicate with 409 and Retry-After, or hold it until the first request is answered and replay that answer",
  released: "End a key's flight with its request: store the answer, or release the key when nothing was done",
  storedStatus: `Replay a stored answer with its own status and body (a stored 4xx or 5xx as well), marked ${MARKER}: true`,
  keyForms: "Accept keys of 1 to 255 characters, raw (Idempotency-Key: k) and as the IETF draft's structured-field string (Idempotency-Key: \"k\"). The client sends the raw form unless told headerForm: \"sf-string\", so a refused quoted form costs nothing until then",
  keyStatus: "Answer GET on the key-status URL with 200 {\"status\":\"done\",\"response\":{\"status\",\"headers\",\"body\"}} for a done key and {\"status\":\"unknown\"} for a key never seen (the contract: server/README.md, \"Key status\")",
  fence: "Answer POST on the key-status URL by settling the key: insert its row if absent, in a statement that waits for a transaction inserting the same key; answer {\"status\":\"done\",...} for a done key, {\"status\":\"in_flight\"} while its request works, {\"status\":\"fenced\"} for a key never seen, and refuse every later request with a fenced key (410) without doing the work (server/README.md, \"Key status\"). Until then, a client that replaces a changed request under a new key (onMismatch: \"replace\") cannot rule out that a request with the old key still on its way makes a second order: prefer onMismatch: \"resume\" or \"error\" there",
  answerAll: "Answer every request (a dropped connection leaves the client guessing)",
} as const;

const is2xx = (answer: Answer): boolean => answer.status >= 200 && answer.status < 300;
/** `answer` is a replay of `first` answered with 409 and its body byte for byte (django-idempotency-key's
 *  way), which the client reads as a replay with `replayStatus: 409`. */
const replayBy409 = (first: Answer, answer: Answer): boolean => answer.status === 409 && first.status !== 409 && first.body !== "" && answer.body === first.body;
const plural = (n: number, word: string): string => `${n} ${word}${n === 1 ? "" : "s"}`;
const pause = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** One key sent twice with one body, the second after the first was answered. */
interface Twice {
  key: string;
  first: Answer;
  second: Answer;
}

async function twice(options: CheckOptions, keyHeader: string, body: string, extra: Record<string, string> = {}): Promise<Twice> {
  const first = await post(options, keyHeader, body, extra);
  return { key: keyHeader, first, second: await post(options, keyHeader, body, extra) };
}

/** Case 1: the same key and body again is the same answer, marked as a replay. */
function replayed({ first, second }: Twice): Outcome {
  if (first.marker) return fail(`the first answer to a fresh key is marked ${spelled(first.marker)}: true (${describe(first)})`, FIX.freshMarked);
  if (replayBy409(first, second)) {
    return pass(`${first.status}, then 409 with the first answer's body byte for byte: a replay answered with 409`, FIX.replayStatus);
  }
  if (IN_FLIGHT.includes(second.status)) {
    return fail(`${first.status}, then ${describe(second)} for the same request after the first was answered: the key stays in flight`, FIX.released);
  }
  if (!sameAnswer(first, second)) return fail(`${describe(first)}, then ${describe(second)}: the same request was answered anew`, FIX.store);
  if (!second.marker) return fail(`${first.status} twice, the same body, but the second is not marked (no ${MARKER}: true)`, FIX.marker);
  return pass(`${first.status} twice, the same body (${plural(first.body.length, "char")}); the second marked ${spelled(second.marker)}: true`);
}

/** Case 2: the same key with another request is 422, and nothing is done. */
async function anotherBody(options: CheckOptions): Promise<Outcome> {
  const key = freshKey();
  const first = await post(options, key, options.body);
  if (!is2xx(first)) return skip(`the request was refused this time (${describe(first)}), so the key held nothing to compare with`);
  const other = await post(options, key, options.otherBody);
  if (other.status === 422) return pass(`${first.status}, then 422 for another body under the same key`);
  if (sameAnswer(first, other)) {
    return fail(`another body under the same key got the first answer back (${other.status}${other.marker ? ", marked replayed" : ""}): no fingerprint check`, FIX.fingerprint);
  }
  if (is2xx(other)) return fail(`another body under the same key was done as a new request (${describe(other)}): no fingerprint check`, FIX.fingerprint);
  return fail(`another body under the same key: ${describe(other)}, not 422`, FIX.status422);
}

/** Case 3: concurrent requests with one key make one effect: one answer, the others refused
 *  (in flight, busy) or its replay, and afterwards the key replays that answer. The requests are
 *  released together; a PASS needs evidence that they met the first one at work: a refusal, or a
 *  first answer slow enough that the duplicates were at the server while it worked. A fast server
 *  can answer the first request before it reads the others, which shows nothing either way, so a
 *  burst without overlap is sent again under a fresh key, up to `BURSTS` times (each burst that was
 *  answered made one effect). A burst sent again passes only on a refusal: a slow first answer
 *  alone can be a loaded machine, and trying until one is slow would pass a server without a lock. */
async function concurrent(options: CheckOptions): Promise<Outcome> {
  let { noOverlap, byTiming: _, ...outcome } = await concurrentOnce(options);
  for (let round = 2; round <= BURSTS && noOverlap; round += 1) {
    const again = await concurrentOnce(options);
    const said = `(burst ${round} of ${BURSTS}: the earlier ${round === 2 ? "one" : "ones"} did not overlap)`;
    noOverlap = again.noOverlap === true || again.byTiming === true;
    outcome = again.byTiming
      ? inconclusive(`${again.seen}; a burst sent again passes only on a refusal ${said}`, FIX.overlap)
      : { verdict: again.verdict, seen: `${again.seen} ${said}`, fix: again.fix, warning: again.warning };
  }
  return outcome;
}

/** One burst of case 3 under a fresh key: `noOverlap` when its requests did not meet at the server,
 *  `byTiming` when it passed on the first answer's time alone (no refusal). */
async function concurrentOnce(options: CheckOptions): Promise<Outcome & { noOverlap?: boolean; byTiming?: boolean }> {
  const key = freshKey();
  const { settled, firstAnswerMs } = await burst(options, key, options.body, CONCURRENT);
  const answers = settled.flatMap((s) => (s.status === "fulfilled" ? [s.value] : []));
  const lost = settled.flatMap((s) => (s.status === "rejected" ? [s.reason instanceof Error ? s.reason.message : String(s.reason)] : []));
  // The effects: the answers that are neither a refusal nor a replay of another answer.
  const done = answers.filter(is2xx);
  const distinct = done.filter((a, i) => done.findIndex((b) => sameAnswer(a, b)) === i);
  const first = distinct[0];
  const by409 = first ? answers.filter((a) => replayBy409(first, a)) : [];
  const refused = answers.filter((a) => REFUSALS.includes(a.status) && !by409.includes(a));
  const other = answers.filter((a) => !is2xx(a) && !refused.includes(a) && !by409.includes(a));
  // The effects' status first, then the others by status: the same order whichever came back first.
  const statuses = [...new Set(answers.map((a) => a.status))].sort((a, b) => Number(b >= 200 && b < 300) - Number(a >= 200 && a < 300) || a - b);
  const counts = statuses.map((status) => {
    const n = answers.filter((a) => a.status === status).length;
    const what = by409.some((a) => a.status === status) ? " (the first answer's body: replays)" : refused.some((a) => a.status === status) ? " (refused, no second effect)" : "";
    return `${n} × ${status}${what}`;
  });
  const burstText = `${CONCURRENT} released together with one key: ${[...counts, ...(lost.length ? [`${lost.length} without an answer`] : [])].join(", ")}${distinct.length > 1 ? ` (${distinct.length} different answers)` : ""}`;
  if (distinct.length > 1) return fail(`${burstText}: the work was done ${distinct.length} times (no in-flight lock)`, FIX.lock);
  if (lost.length) return fail(`${burstText} (${lost[0]})`, FIX.duplicates);
  if (other.length) return fail(`${burstText}: concurrent duplicates got ${describe(other[0] as Answer)}, neither the first answer, its replay nor a refusal`, FIX.duplicates);
  if (!first) return inconclusive(`${burstText}: every request was refused, so there was no effect to count`, "Run the check while the endpoint accepts requests (no rate limit or outage in the way)");
  // After the burst the key answers with the one result (a replay): the work was done once, and kept.
  const deadline = Date.now() + SETTLE_MS;
  let last = await post(options, key, options.body);
  while (REFUSALS.includes(last.status) && !replayBy409(first, last) && Date.now() < deadline) {
    await pause(Math.min(Number(last.retryAfter) * 1000 || 500, 2000));
    last = await post(options, key, options.body);
  }
  if (REFUSALS.includes(last.status) && !replayBy409(first, last)) return fail(`${burstText}; the key was still refused ${SETTLE_MS / 1000} s later (${describe(last)})`, FIX.released);
  if (!sameAnswer(first, last) && !replayBy409(first, last)) return fail(`${burstText}; then the key answered ${describe(last)}, not that answer`, FIX.store);
  const overlapped = `the first answer came back ${Math.round(firstAnswerMs)} ms after the release`;
  if (firstAnswerMs < 0) {
    return { ...inconclusive(`${burstText}: an answer came back before every request was whole, so the requests did not overlap`, FIX.overlap), noOverlap: true };
  }
  if (!refused.length && firstAnswerMs < HELD_MS) {
    return {
      ...inconclusive(`${burstText}, one effect, but ${overlapped}: the duplicates may have been handled one after another, which a server without an in-flight lock survives too`, FIX.overlap),
      noOverlap: true,
    };
  }
  const bare = [...new Set(refused.filter((a) => a.retryAfter === null).map((a) => a.status))];
  const warnings = [
    ...(bare.length ? [`${plural(refused.filter((a) => a.retryAfter === null).length, "refusal")} (${bare.join(", ")}) without Retry-After: the client retries them after its own backoff. ${FIX.retryAfter}`] : []),
    ...(by409.length || replayBy409(first, last) ? [FIX.replayStatus] : []),
  ];
  const how = [...(refused.length ? ["refused"] : []), ...(done.length > 1 || by409.length ? ["its replay"] : [])].join(" or ");
  const outcome = pass(`${burstText}: one effect${how ? `, the others ${how}` : ""} (${overlapped}); then ${last.marker ? "the replay" : "the same answer"} of that ${first.status}`, warnings.join(" "));
  return { ...outcome, byTiming: !refused.length };
}

/** Case 4: a stored failure is replayed with its own status. Only a failure the endpoint stores can show it. */
async function storedFailure(options: CheckOptions): Promise<Outcome> {
  const { first, second } = await twice(options, freshKey(), REFUSED_BODY);
  const outside = "a stored 5xx cannot be caused from outside; case 1 checked that a replay keeps its status";
  if (is2xx(first)) return skip(`the endpoint accepted a body it should refuse (${describe(first)}), so no stored failure could be made; ${outside}`);
  if (second.marker) {
    if (sameAnswer(first, second)) return pass(`a refused request: ${first.status}, then the replay of that ${second.status} (marked ${spelled(second.marker)}: true)`);
    return fail(`a refused request: ${describe(first)}, then a replay ${describe(second)}`, FIX.storedStatus);
  }
  if (IN_FLIGHT.includes(second.status)) return fail(`a refused request: ${first.status}, then ${describe(second)}: the key stays in flight after a failure`, FIX.released);
  return skip(`a refused request: ${first.status}, then ${second.status} unmarked: answered anew (a refusal need not be stored) or replayed without the marker (case 1), which cannot be told apart; ${outside}`);
}

/** Case 5: every key form the client sends is accepted and idempotent. */
async function keyForms(options: CheckOptions): Promise<Outcome> {
  const forms: [string, string][] = [
    ["raw UUID", freshKey()],
    ["sf-string \"UUID\"", `"${freshKey()}"`],
    [`${LONG_KEY_LENGTH} chars`, longKey(LONG_KEY_LENGTH)],
  ];
  const seen: string[] = [];
  const problems: string[] = [];
  let by409 = false;
  for (const [name, header] of forms) {
    const { first, second } = await twice(options, header, options.body);
    if (!is2xx(first)) problems.push(`${name}: refused, ${describe(first)}`);
    else if (replayBy409(first, second)) {
      by409 = true;
      seen.push(`${name} ${first.status}, then replayed with 409`);
    } else if (!sameAnswer(first, second)) problems.push(`${name}: ${first.status}, then ${describe(second)}: done anew`);
    else seen.push(`${name} ${first.status}, then ${second.marker ? "replayed" : "the same answer"}`);
  }
  if (problems.length) return fail([...problems, ...seen].join("; "), FIX.keyForms);
  return pass(seen.join("; "), by409 ? FIX.replayStatus : "");
}

/** What a key-status answer says, or what is wrong with it. */
async function keyStatus(options: CheckOptions, template: string, key: string): Promise<{ body?: Record<string, unknown>; problem?: string }> {
  const url = template.replaceAll("{key}", encodeURIComponent(key));
  const answer = await get(options, url);
  if (answer.status !== 200) return { problem: `GET ${url}: ${describe(answer)}` };
  try {
    const body: unknown = JSON.parse(answer.body);
    if (body !== null && typeof body === "object" && !Array.isArray(body)) return { body: body as Record<string, unknown> };
  } catch {
    // Reported below.
  }
  return { problem: `GET ${url}: not a JSON object: ${describe(answer)}` };
}

/** Case 6: the key-status endpoint knows a done key's answer, and says "unknown" for a key never sent. */
async function keyStatusEndpoint(options: CheckOptions, done: Twice): Promise<Outcome> {
  if (options.keyStatusUrl === null) return skip("no --key-status-url given", "Give --key-status-url (e.g. /api/idempotency-keys/{key}) to check the endpoint the client's reconcile option asks");
  const problems: string[] = [];
  const known = await keyStatus(options, options.keyStatusUrl, done.key);
  const response = known.body?.["response"];
  const stored = response !== null && typeof response === "object" ? (response as Record<string, unknown>) : null;
  if (known.problem) problems.push(`a done key: ${known.problem}`);
  else if (known.body?.["status"] !== "done") problems.push(`a done key: status ${JSON.stringify(known.body?.["status"])}, not "done"`);
  else if (stored?.["status"] !== done.first.status || stored["body"] !== done.first.body) {
    problems.push(`a done key: "done" without its answer (${done.first.status} and its body as a string)`);
  }
  const unknown = await keyStatus(options, options.keyStatusUrl, freshKey());
  if (unknown.problem) problems.push(`a key never sent: ${unknown.problem}`);
  else if (unknown.body?.["status"] !== "unknown") problems.push(`a key never sent: status ${JSON.stringify(unknown.body?.["status"])}, not "unknown"`);
  if (problems.length) return fail(problems.join("; "), FIX.keyStatus);
  return pass(`a done key: "done" with its ${done.first.status} and body; a key never sent: "unknown"`);
}

/** What a settle answer says (its `status`), or what is wrong with it; `absent` when the server has no
 *  settle request at all (404, 405 or 501 to POST). */
async function settled(options: CheckOptions, template: string, key: string): Promise<{ status?: unknown; body?: Record<string, unknown>; problem?: string; absent?: boolean }> {
  const url = template.replaceAll("{key}", encodeURIComponent(key));
  const answer = await settle(options, url);
  if ([404, 405, 501].includes(answer.status)) return { absent: true, problem: `POST ${url}: ${describe(answer)}` };
  if (answer.status !== 200) return { problem: `POST ${url}: ${describe(answer)}` };
  try {
    const body: unknown = JSON.parse(answer.body);
    if (body !== null && typeof body === "object" && !Array.isArray(body)) {
      return { status: (body as Record<string, unknown>)["status"], body: body as Record<string, unknown> };
    }
  } catch {
    // Reported below.
  }
  return { problem: `POST ${url}: not a JSON object: ${describe(answer)}` };
}

/** Case 7: settling a key (the fence): a done key is "done" with its answer; a key never sent is "fenced",
 *  stays fenced, and a request that then comes with it does nothing. */
async function fence(options: CheckOptions, done: Twice): Promise<Outcome> {
  if (options.keyStatusUrl === null) return skip("no --key-status-url given", "Give --key-status-url (e.g. /api/idempotency-keys/{key}) to check that the server can settle a key (POST on it)");
  const template = options.keyStatusUrl;
  const known = await settled(options, template, done.key);
  if (known.absent) return fail(`no settle request: ${known.problem}`, FIX.fence);
  const problems: string[] = [];
  const seen: string[] = [];
  const stored = known.body?.["response"];
  if (known.problem) problems.push(`a done key: ${known.problem}`);
  else if (known.status !== "done") problems.push(`a done key: status ${JSON.stringify(known.status)}, not "done"`);
  else if (stored === null || typeof stored !== "object" || (stored as Record<string, unknown>)["status"] !== done.first.status) {
    problems.push(`a done key: "done" without its answer (${done.first.status})`);
  } else seen.push(`a done key: "done" with its ${done.first.status}`);
  const key = freshKey();
  const first = await settled(options, template, key);
  if (first.problem) problems.push(`a key never sent: ${first.problem}`);
  else if (first.status !== "fenced") problems.push(`a key never sent: status ${JSON.stringify(first.status)}, not "fenced"`);
  else {
    const late = await post(options, key, options.body);
    if (is2xx(late)) problems.push(`a fenced key, then a request with it: ${describe(late)}: the work was done after the fence`);
    else if (late.status >= 500 || [408, 409, 423, 425, 429].includes(late.status)) {
      problems.push(`a fenced key, then a request with it: ${describe(late)}, which the client retries: answer 410 (definite)`);
    } else seen.push(`a key never sent: "fenced", then its request refused ${late.status}`);
    const again = await settled(options, template, key);
    if (again.status !== "fenced") problems.push(`a fenced key settled again: ${again.problem ?? `status ${JSON.stringify(again.status)}`}, not "fenced"`);
  }
  if (problems.length) return fail([...problems, ...seen].join("; "), FIX.fence);
  return pass(seen.join("; "));
}

/** The names in a CORS list header, lower case; `*` counts only without credentials (Fetch standard). */
function corsList(answer: Answer, name: string): { names: string[]; any: boolean } {
  const names = (answer.headers.get(name) ?? "").split(",").map((n) => n.trim().toLowerCase()).filter(Boolean);
  return { names, any: names.includes("*") && answer.headers.get("access-control-allow-credentials") !== "true" };
}

/** Case 8: a page at `--origin` may send the keyed POST and read the marker and Retry-After. */
async function cors(options: CheckOptions, marker: string | null): Promise<Outcome> {
  const origin = options.origin;
  if (origin === null) return skip("no --origin given", "Give --origin with the origin of a page that calls the endpoint cross-origin, to check its CORS answers");
  const sent = [...new Set(["content-type", "idempotency-key", ...options.headers.map(([name]) => name.toLowerCase()).filter((n) => n !== "cookie")])].sort();
  const allowOrigin = (answer: Answer): boolean => [origin, "*"].includes(answer.headers.get("access-control-allow-origin") ?? "")
    && !(answer.headers.get("access-control-allow-origin") === "*" && answer.headers.get("access-control-allow-credentials") === "true");
  const pre = await preflight(options, origin, sent);
  const methods = corsList(pre, "access-control-allow-methods");
  const allowed = corsList(pre, "access-control-allow-headers");
  const refused = sent.filter((name) => !allowed.any && !allowed.names.includes(name));
  const preflightProblems = [
    ...(is2xx(pre) ? [] : [`the preflight answered ${pre.status}`]),
    ...(allowOrigin(pre) ? [] : [`the preflight allows origin ${JSON.stringify(pre.headers.get("access-control-allow-origin"))}`]),
    ...(methods.any || methods.names.includes("post") ? [] : ["the preflight does not allow POST"]),
    ...(refused.length ? [`the preflight does not allow ${refused.join(", ")}`] : []),
  ];
  if (preflightProblems.length) {
    return fail(preflightProblems.join("; "), `Answer the preflight from ${origin} with Access-Control-Allow-Origin: ${origin}, Access-Control-Allow-Methods: POST and ${ALLOW_LINE("Idempotency-Key")}${sent.length > 2 ? `, ${sent.filter((n) => n !== "content-type" && n !== "idempotency-key").map(spelled).join(", ")}` : ""}`);
  }
  const replay = await twice(options, freshKey(), options.body, { origin });
  const markerName = marker ?? "idempotent-replayed";
  const exposed = corsList(replay.second, "access-control-expose-headers");
  const hidden = [markerName, "retry-after"].filter((name) => !exposed.any && !exposed.names.includes(name));
  const answerProblems = [
    ...([replay.first, replay.second].every(allowOrigin) ? [] : [`the POST's answers allow origin ${JSON.stringify(replay.second.headers.get("access-control-allow-origin"))}`]),
    ...(hidden.length ? [`the answers do not expose ${hidden.map(spelled).join(", ")} (the page cannot read them)`] : []),
  ];
  if (answerProblems.length) {
    return fail(answerProblems.join("; "), `Answer the requests from ${origin} with Access-Control-Allow-Origin: ${origin} and ${exposeLine([markerName])}`);
  }
  return pass(`the preflight allows POST with ${sent.join(", ")}; the answers expose ${spelled(markerName)} and Retry-After to ${origin}`);
}

/** The cases, in the order they run and print: a name, and the outcome from the options and case 1's exchange. */
const CASES: readonly [string, (options: CheckOptions, probe: Twice) => Promise<Outcome> | Outcome][] = [
  ["same key, same body: replayed", (_, probe) => replayed(probe)],
  ["same key, another body: 422", anotherBody],
  [`${CONCURRENT} concurrent, one key: one effect`, concurrent],
  ["a stored failure keeps its status", storedFailure],
  ["key forms: raw, sf-string, long", keyForms],
  ["key-status endpoint", keyStatusEndpoint],
  ["settle: the fence", fence],
  ["CORS for a cross-origin page", (options, probe) => cors(options, probe.second.marker)],
];

/**
 * Runs every case against the endpoint, in order; a request without an answer is its case's FAIL.
 * Throws `CannotCheck` when the endpoint gives no answer or refuses the request it was given: then
 * no case can say anything.
 */
export async function runCheck(options: CheckOptions): Promise<Row[]> {
  let probe: Twice;
  try {
    probe = await twice(options, freshKey(), options.body);
  } catch (error) {
    if (error instanceof NoAnswer) throw new CannotCheck(error.message);
    throw error;
  }
  if (!is2xx(probe.first)) {
    throw new CannotCheck(`POST ${options.url.href} with a fresh key answered ${describe(probe.first)}: the check needs a request the endpoint accepts (a 2xx); give its credentials with --header and a valid body with --body`);
  }
  const rows: Row[] = [];
  for (const [index, [name, outcome]] of CASES.entries()) {
    try {
      rows.push({ id: index + 1, name, ...(await outcome(options, probe)) });
    } catch (error) {
      if (!(error instanceof NoAnswer)) throw error;
      rows.push({ id: index + 1, name, ...fail(error.message, FIX.answerAll) });
    }
  }
  return rows;
}
