// The send loop: the machine decides, the driver performs. Each call into the machine returns an
// action; the driver saves the record first when it is dirty, performs the action (an attempt, a
// wait, waiting for the network), and feeds the outcome back, until DONE or FAIL.

import { sendAttempt } from "./attempt.js";
import type { CorsTally } from "./cors.js";
import { type ClientCore, dropClaim, saveRecord } from "./core.js";
import { describe, IdempotentFetchError } from "./errors.js";
import { call, type AttemptEvent, type OfflineEvent, type ReconcileEvent, type RetryEvent } from "./events.js";
import * as M from "./machine.js";
import { errorFor, retryReasonText } from "./messages.js";
import { isOnline, waitOnline } from "./online.js";
import { corsPart, placementPart, reconcilePart } from "./lazy.js";
import type { SendWatcher } from "./observer.js";
import type { KeyStatusRead } from "./reconcile.js";
import type { PersistedRequest, RecordIds } from "./record.js";
import type { PreparedRequest } from "./request.js";
import type { SendResult } from "./results.js";
import { INTERRUPTED, sleep } from "./wait.js";

/** @internal One `send`'s inputs. */
export interface SendContext {
  core: ClientCore;
  machine: M.Machine;
  ids: RecordIds;
  /** The persisted request kept in the record (driver-only data). */
  persisted: PersistedRequest | undefined;
  request: PreparedRequest;
  signal: AbortSignal | undefined;
  onAttempt: ((event: AttemptEvent) => void) | undefined;
  onRetry: ((event: RetryEvent) => void) | undefined;
  /** Answered, the record and its claim are deleted instead of the record written retired
   *  (`client.fetch` without intent: the request names the intent). */
  deleteWhenAnswered?: boolean | undefined;
  /** Ask the server about the key instead of sending (`reconcile()`). */
  ask?: boolean | undefined;
  /** The observer's watcher of this send (`ClientOptions.observer`). */
  watch?: SendWatcher | undefined;
}

/** @internal `reconcile()`'s answer when it is not "done": the machine's E_KEY_STATUS detail (a KEY_*). */
export class KeyStatusOpen {
  constructor(readonly detail: number) {}
}

/** The caller's `shouldRetry(status)` as the machine's override (a throwing or junk answer: none). */
function override(shouldRetry: ((status: number) => unknown) | undefined, status: number): number {
  if (!shouldRetry || (status >= 200 && status <= 299)) return M.OVERRIDE_NONE;
  try {
    const decision = shouldRetry(status);
    return decision === true ? M.OVERRIDE_RETRY : decision === false ? M.OVERRIDE_DEFINITE : M.OVERRIDE_NONE;
  } catch {
    return M.OVERRIDE_NONE;
  }
}

/** An attempt to another origin that failed below HTTP this soon was refused, not lost on the way
 *  (a preflight that does not allow the key header fails at once). */
const REFUSED_WITHIN_MS = 2_000;

/** The origin of `url` when it is not the page's (undefined in Node, or same-origin). */
function foreignOrigin(url: string): string | undefined {
  const page = (globalThis as { location?: { origin?: string } }).location?.origin;
  if (!page || page === "null") return undefined;
  const origin = new URL(url, page).origin;
  return origin === page ? undefined : origin;
}

/** @internal Drives the intent to DONE (resolves) or FAIL (rejects with IdempotentFetchError). */
export async function runSend(ctx: SendContext): Promise<SendResult> {
  const { core, machine, signal, ids, watch } = ctx;
  const { config, listeners } = core;
  const { intentId, key } = ids;
  /** Emits a client event of this send, told to its watcher first. */
  const tell = (event: RetryEvent | ReconcileEvent | OfflineEvent) => {
    watch?.(event);
    listeners.emit(event);
  };
  const header = machine.key(true);
  // The key in the body instead of a header: written once, every attempt sends these bytes.
  const request = config.keyIn ? (await placementPart()).placeKey(ctx.request, key, config.keyIn) : ctx.request;
  const origin = foreignOrigin(request.url);
  const tally: CorsTally = { attempts: 0, refused: 0, last: undefined, repeatedBlind: 0 };
  let response: Response | undefined;
  // The time given to the machine call that returned `action`: a SEND's attempt ends `F_TIMEOUT_MS`
  // after it (the machine's clock), so the record's save before the attempt counts against it too.
  let decidedAt = Date.now();
  let action = machine.on(ctx.ask ? M.EV_ASK : M.EV_START, decidedAt, isOnline());
  /** Why the last question about the key got no usable answer (for the message). */
  let askProblem: string | undefined;
  /** Why the send made one attempt more than its limit (for the message: the count stays true). */
  let oneMore: string | undefined;
  for (;;) {
    if (machine.get(M.F_DIRTY) === 1) {
      try {
        if (action === M.DONE && ctx.deleteWhenAnswered) {
          // The claim's deletion first, not waited for: a later begin of the identical request, in
          // this tab or another, is ordered after it by IndexedDB (core.ts `dropClaim`), so the
          // answer does not wait for its commit. A page closed in the millisecond before the commit
          // leaves the claim, and the request sent again replays this answer instead of a new order.
          void dropClaim(core, intentId, ids.key);
          await core.store.delete(intentId);
        } else await saveRecord(core, machine, ids, ctx.persisted);
      } catch (error) {
        // A reload during the attempt must find the key: never send unsaved. After an answer, the
        // answer matters more (a later send replays the same key and the server answers the same).
        if (action === M.SEND && error instanceof IdempotentFetchError) {
          throw new IdempotentFetchError(error.code, error.message, {
            key,
            attempts: machine.get(M.F_ATTEMPT) - 1,
            lastStatus: machine.get(M.F_LAST_STATUS) || null,
          });
        }
      }
    }
    switch (action) {
      case M.SEND: {
        const event: AttemptEvent = {
          type: "attempt",
          intentId,
          key,
          attempt: machine.get(M.F_ATTEMPT),
          totalAttempts: machine.get(M.F_TOTAL_ATTEMPTS),
        };
        call(ctx.onAttempt, event);
        listeners.emit(event);
        const endsAt = decidedAt + machine.get(M.F_TIMEOUT_MS);
        const sentAt = Date.now();
        const outcome = await sendAttempt(request, config.keyIn ? undefined : config.headerName, header, endsAt - sentAt, signal, watch?.(event));
        const now = (decidedAt = Date.now());
        watch?.(outcome);
        tally.attempts += 1;
        if (typeof outcome === "number") {
          if (origin && outcome === M.EV_NETWORK_ERROR && now - sentAt < REFUSED_WITHIN_MS) tally.refused += 1;
          tally.last = undefined;
          action = machine.on(outcome, now, false);
        } else {
          const get = (name: string) => outcome.headers.get(name) ?? undefined;
          // The first replay header present, in the configured order (the machine reads "true").
          const replayed = config.replayHeaders.map(get).find((value) => value !== undefined);
          action = machine.onResponse(
            now,
            outcome.status,
            get("retry-after"),
            get("stripe-should-retry"),
            replayed,
            override(config.shouldRetry, outcome.status),
          );
          // Asking about the key after an answer: without a usable answer, this one stands.
          if (action === M.DONE || action === M.RECONCILE) response = outcome;
          // A retried answer's body is not the caller's: cancel it so the connection can be reused.
          else outcome.body?.cancel().catch(() => {});
          // A diagnosis that cannot load (offline) only means no diagnosis: the send goes on.
          if (origin && action !== M.DONE) (await corsPart().catch(() => undefined))?.observe(tally, outcome);
        }
        break;
      }
      case M.RECONCILE: {
        tell({ type: "reconcile", intentId, key });
        const answer = await reconcilePart().then(
          (part) => part.askKeyStatus(config.reconciler, request, intentId, key, machine.get(M.F_TIMEOUT_MS), signal),
          // Not loaded (offline before the first question): the machine's "could not ask".
          (thrown: unknown): KeyStatusRead => ({ kind: M.KEY_COULD_NOT_ASK, problem: __DEV__ ? `the reconcile part did not load: ${describe(thrown)}` : undefined }),
        );
        decidedAt = Date.now();
        askProblem = answer.problem;
        if (signal?.aborted) action = machine.on(M.EV_ABORT, decidedAt, false);
        else {
          if (answer.kind === M.KEY_DONE) response = answer.response;
          action = machine.onKeyStatus(decidedAt, answer.kind, answer.response?.status ?? 0, answer.retryAfter);
          if (__DEV__ && (action === M.SEND || action === M.WAIT)) {
            oneMore = `the server ${answer.kind === M.KEY_UNKNOWN ? "had no record of the key" : "had it in flight"}, so it was sent once more`;
          }
          if (origin && answer.response && answer.stored) {
            // The server's own account of the answer: the evidence of headers the page was not shown.
            const part = await corsPart().catch(() => undefined);
            const fix = part?.observeStored(tally, answer.response.status, answer.stored, origin, config.replayHeaders, core.corsWarned);
            if (fix) listeners.emit({ type: "cors", intentId, key, origin, fix });
          }
        }
        break;
      }
      case M.WAIT: {
        const reason = machine.get(M.F_REASON);
        const status = reason === M.REASON_STATUS ? machine.get(M.F_LAST_STATUS) : 0;
        const event: RetryEvent = {
          type: "retry",
          intentId,
          key,
          attempt: machine.get(M.F_ATTEMPT),
          delayMs: machine.get(M.F_DELAY_MS),
          reason: retryReasonText(reason, status),
          status: status || null,
        };
        call(ctx.onRetry, event);
        tell(event);
        try {
          await sleep(event.delayMs, signal);
          action = machine.on(M.EV_WAKE, (decidedAt = Date.now()), isOnline());
        } catch (thrown) {
          if (thrown !== INTERRUPTED) throw thrown;
          action = machine.on(M.EV_ABORT, Date.now(), false);
        }
        break;
      }
      case M.WAIT_ONLINE: {
        tell({ type: "offline", intentId, key });
        try {
          const online = await waitOnline(machine.get(M.F_TIMEOUT_MS), signal);
          action = machine.on(online ? M.EV_ONLINE : M.EV_ONLINE_TIMEOUT, (decidedAt = Date.now()), false);
        } catch (thrown) {
          if (thrown !== INTERRUPTED) throw thrown;
          action = machine.on(M.EV_ABORT, Date.now(), false);
        }
        break;
      }
      case M.DONE:
        if (!response) throw errorFor(0, 0, { intentId, key });
        return {
          response,
          status: machine.get(M.F_STATUS),
          ok: machine.get(M.F_OK) === 1,
          replayed: machine.get(M.F_REPLAYED) === 1,
          uncertain: machine.get(M.F_UNCERTAIN) === 1,
          durable: core.store.durable,
          attempts: machine.get(M.F_ATTEMPT),
          key,
          intentId,
        };
      case M.FAIL: {
        const code = machine.get(M.F_ERROR_CODE);
        const lastStatus = machine.get(M.F_LAST_STATUS);
        const context = { intentId, key, attempts: machine.get(M.F_ATTEMPT), lastStatus: lastStatus || null };
        const detail = machine.get(M.F_ERROR_DETAIL);
        if (code === M.E_KEY_STATUS && detail !== M.KEY_COULD_NOT_ASK) throw new KeyStatusOpen(detail);
        // What the attempts showed, said in the development build's message only.
        const hints: (string | undefined)[] = [];
        if (__DEV__ && code === M.E_RETRIES_EXHAUSTED) {
          if (M.IN_FLIGHT_STATUSES.includes(lastStatus)) {
            hints.push(`the server kept answering ${lastStatus}: the request is still in progress there, or it holds the answer`);
          }
          if (origin) hints.push((await corsPart().catch(() => undefined))?.corsHint(tally, origin, config.headerName, config.replayHeaders));
        }
        if (__DEV__ && askProblem) hints.push(`the key's status is unknown (${askProblem})`);
        if (__DEV__ && oneMore) hints.push(`${oneMore} (${context.attempts} attempts in all)`);
        throw errorFor(code, detail, context, (__DEV__ && hints.filter(Boolean).join("; ")) || undefined);
      }
      default:
        throw errorFor(M.E_INTERNAL, M.PROTOCOL_UNKNOWN_ACTION, { intentId, key });
    }
  }
}
