// The send loop: the machine decides, the driver performs. Each call into the machine returns an
// action; the driver saves the record first when it is dirty, performs the action (an attempt, a
// wait, waiting for the network), and feeds the outcome back, until DONE or FAIL.

import { sendAttempt } from "./attempt.js";
import { type ClientCore, saveRecord } from "./core.js";
import { IdempotentFetchError } from "./errors.js";
import { call, type AttemptEvent, type RetryEvent } from "./events.js";
import * as M from "./machine.js";
import { errorFor, retryReasonText } from "./messages.js";
import { isOnline, waitOnline } from "./online.js";
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
  /** Answered, the record is deleted instead of written retired (`client.fetch` without intent). */
  retire?: boolean | undefined;
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

/** @internal Drives the intent to DONE (resolves) or FAIL (rejects with IdempotentFetchError). */
export async function runSend(ctx: SendContext): Promise<SendResult> {
  const { core, machine, request, signal, ids } = ctx;
  const { config, listeners } = core;
  const { intentId, key } = ids;
  const header = machine.key(true);
  let response: Response | undefined;
  let action = machine.on(M.EV_START, Date.now(), isOnline());
  for (;;) {
    if (machine.get(M.F_DIRTY) === 1) {
      try {
        if (action === M.DONE && ctx.retire) await core.store.delete(intentId);
        else await saveRecord(core, machine, ids, ctx.persisted);
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
        const outcome = await sendAttempt(request, config.headerName, header, machine.get(M.F_TIMEOUT_MS), signal);
        const now = Date.now();
        if (typeof outcome === "number") action = machine.on(outcome, now, false);
        else {
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
          if (action === M.DONE) response = outcome;
          // A retried answer's body is never read: cancel it so the connection can be reused.
          else outcome.body?.cancel().catch(() => {});
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
        listeners.emit(event);
        try {
          await sleep(event.delayMs, signal);
          action = machine.on(M.EV_WAKE, Date.now(), isOnline());
        } catch (thrown) {
          if (thrown !== INTERRUPTED) throw thrown;
          action = machine.on(M.EV_ABORT, Date.now(), false);
        }
        break;
      }
      case M.WAIT_ONLINE: {
        listeners.emit({ type: "offline", intentId, key });
        try {
          const online = await waitOnline(machine.get(M.F_TIMEOUT_MS), signal);
          action = machine.on(online ? M.EV_ONLINE : M.EV_ONLINE_TIMEOUT, Date.now(), false);
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
      case M.FAIL:
        throw errorFor(machine.get(M.F_ERROR_CODE), machine.get(M.F_ERROR_DETAIL), {
          intentId,
          key,
          attempts: machine.get(M.F_ATTEMPT),
          lastStatus: machine.get(M.F_LAST_STATUS) || null,
        });
      default:
        throw errorFor(M.E_INTERNAL, M.PROTOCOL_UNKNOWN_ACTION, { intentId, key });
    }
  }
}
