// `IdempotentOperation`: one intent (one click on "Pay") and its key, and `send`.

import { type ClientCore, dropClaim, intentLock, loadRecord, SEND_LOCK_OFFER_MS } from "./core.js";
import { IdempotentFetchError, invalidOptions, invalidRequest } from "./errors.js";
import { Fields } from "./fields.js";
import type { Release } from "./lock.js";
import {
  F_CREATED_AT,
  F_LAST_STATUS,
  F_STATE,
  F_TOTAL_ATTEMPTS,
  F_UPDATED_AT,
  KEY_IN_FLIGHT,
  STATE_PENDING,
  type Machine,
  STATES,
} from "./machine.js";
import { ABORTED_MESSAGE, INTENT_ID_MESSAGE, notFound, storageUnavailable } from "./messages.js";
import type { SendWatcher } from "./observer.js";
import { decodeRecord, type PersistedRequest, type RecordIds } from "./record.js";
import type { PreparedRequest } from "./request.js";
import type { SendOptions, SendResult } from "./results.js";
import { KeyStatusOpen, runSend } from "./send.js";
import { reconcilePart } from "./lazy.js";
import { INTERRUPTED } from "./wait.js";
import { OPT_ATTEMPT_TIMEOUT_MS, type IntentState } from "./generated/contract.js";

/** `reconcile()`'s answer: the server's stored answer for the key, or what it said instead. */
export type ReconcileResult =
  | {
      /** The server holds the key's answer. */
      status: "done";
      /** That answer, as a send would have resolved with it (`replayed: true`). */
      result: SendResult;
    }
  | {
      /** A request with the key is still running on the server. */
      status: "in_flight";
    }
  | {
      /** The server has no record of the key. */
      status: "unknown";
    };

/** `settle()`'s answer: what the server made of the key when asked to settle it (the fence). */
export type SettleResult =
  | {
      /** The key's request was done: the server's stored answer (the intent is retired with it). */
      status: "done";
      /** That answer, as a send would have resolved with it (`replayed: true`). */
      result: SendResult;
    }
  | {
      /** A request with the key is doing its work at the server now: settle again later. */
      status: "in_flight";
    }
  | {
      /** The server had never seen the key and now records that it never may: no request with it
       *  will do the work (a late one is refused 410). The intent can take a new key safely. */
      status: "fenced";
    }
  | {
      /** The server has no settle request (its status URL refused POST with 404, 405 or 501, or only
       *  the `reconcile` callback is configured): it cannot rule out that a request with the key still
       *  on its way does the work later. `reason` says what was seen. */
      status: "no_fence";
      /** What the server answered. */
      reason: string;
    };

// The states are the contract table's names (src/contract.rs), generated.
export type { IntentState };

/** @internal What an operation shows of its record, as of the last `begin`/`send`. */
export interface RecordView {
  intentId: string;
  key: string;
  state: IntentState;
  attempts: number;
  lastStatus: number | null;
  createdAt: number;
  updatedAt: number;
}

/** @internal A view of the machine's record (the machine itself stays owned by the caller). */
export function viewOf(machine: Machine, ids: Pick<RecordIds, "intentId" | "key">): RecordView {
  // In IntentInfo's order (pending() spreads it).
  return {
    intentId: ids.intentId,
    key: ids.key,
    state: STATES[machine.get(F_STATE)] as IntentState,
    attempts: machine.get(F_TOTAL_ATTEMPTS),
    createdAt: machine.get(F_CREATED_AT),
    updatedAt: machine.get(F_UPDATED_AT),
    lastStatus: machine.get(F_LAST_STATUS) || null,
  };
}

/** @internal An operation `client.fetch` sends at once. */
export interface SentNow {
  /** The record `begin` left for the first `send` to write (one write fewer). */
  unsaved: string | undefined;
  /** Delete the record (and its claim) once answered instead of writing it retired: an intent named
   *  by its request (`client.fetch` without `intent`), which the same request later begins anew. */
  deleteWhenAnswered: boolean;
}

/** One user intent (one click on "Pay") and its idempotency key. Get one from `client.begin`. */
export class IdempotentOperation {
  /** The send lock `begin` took on the way (core.ts, offerSendLock), until a `send` adopts it. */
  private offered: { release: Release; timer: ReturnType<typeof setTimeout> | undefined } | undefined;

  private constructor(
    private readonly core: ClientCore,
    private view: RecordView,
    /** The machine's `F_RESUMED` at begin: the key existed before (stored, or claimed by another tab). */
    private readonly wasResumed: boolean,
    private readonly request: PreparedRequest,
    sendLock: Release | undefined,
    private sentNow: SentNow | undefined,
    /** `resume`'s `pendingOnly`: an intent answered meanwhile is not sent again. */
    private readonly pendingOnly: boolean,
  ) {
    // Sent at once, the lock needs no timer to let it go.
    if (sendLock && sentNow) this.offered = { release: sendLock, timer: undefined };
    else if (sendLock) {
      const timer = setTimeout(() => this.adoptLock()?.(), SEND_LOCK_OFFER_MS);
      this.offered = { release: sendLock, timer };
    }
  }

  /** @internal Made by the client only (`begin`, `resume`). */
  static create(
    core: ClientCore,
    view: RecordView,
    resumed: boolean,
    request: PreparedRequest,
    sendLock?: Release,
    sentNow?: SentNow,
    pendingOnly = false,
  ): IdempotentOperation {
    return new IdempotentOperation(core, view, resumed, request, sendLock, sentNow, pendingOnly);
  }

  /** Takes over the offered send lock, if it is still held. */
  private adoptLock(): Release | undefined {
    const offered = this.offered;
    this.offered = undefined;
    if (offered) clearTimeout(offered.timer);
    return offered?.release;
  }

  /** The idempotency key: the same on every attempt and after a reload. */
  get key(): string {
    return this.view.key;
  }

  /** The app's id of the intent. */
  get intentId(): string {
    return this.view.intentId;
  }

  /** Where the intent stands, as of the last `begin`/`send`. */
  get state(): IntentState {
    return this.view.state;
  }

  /** Attempts across every `send` of this intent, including earlier page loads. */
  get attempts(): number {
    return this.view.attempts;
  }

  /** Status of the last answer, or `null`. */
  get lastStatus(): number | null {
    return this.view.lastStatus;
  }

  /** When the intent began (ms since the epoch). */
  get createdAt(): number {
    return this.view.createdAt;
  }

  /** Whether the intent's key is in durable storage now (survives a reload): false in memory,
   *  also after a `storagefallback`. */
  get durable(): boolean {
    return this.core.store.durable;
  }

  /** Whether this intent's key existed before this `begin` (an earlier `begin` of the same intent,
   *  before a reload or in another tab) rather than being made by it. */
  get resumed(): boolean {
    return this.wasResumed;
  }

  /**
   * Sends with the intent's key until the server gives a definite answer.
   *
   * Resolves to `SendResult` on 2xx and on a definite failure such as 400 (`ok: false`).
   * Rejects with `IdempotentFetchError`: `RETRIES_EXHAUSTED` or `ABORTED` (the key is kept: call
   * `send` again, now or after a reload, to resume), `KEY_MISMATCH` (422), `EXPIRED`, `STORAGE`,
   * `NOT_FOUND`.
   */
  async send(options?: SendOptions): Promise<SendResult> {
    return this.run(options, false);
  }

  /**
   * Asks the server what became of this intent's key (the key-status protocol: `statusUrl` or
   * `reconcile` in the client's options), e.g. when a send ended `EXPIRED` or `RETRIES_EXHAUSTED`.
   * Resolves `{ status: "done", result }` with the server's stored answer (the intent is retired,
   * exactly as after a replayed answer), or `{ status: "in_flight" }` / `{ status: "unknown" }` (the
   * intent is unchanged: `send` again within the key's lifetime). Rejects `RECONCILE_FAILED` when the
   * server could not be asked, `INVALID_OPTIONS` when no way to ask is configured, `ABORTED`.
   */
  async reconcile(options?: Pick<SendOptions, "signal">): Promise<ReconcileResult> {
    const { reconciler } = this.core.config;
    if (!reconciler.statusUrl && !reconciler.reconcile) throw invalidOptions(__DEV__ && "reconcile() needs the statusUrl or reconcile option");
    try {
      return { status: "done", result: await this.run(options, true) };
    } catch (thrown) {
      if (thrown instanceof KeyStatusOpen) return { status: thrown.detail === KEY_IN_FLIGHT ? "in_flight" : "unknown" };
      throw thrown;
    }
  }

  /**
   * Settles this intent's key at the server (a POST of `statusUrl`: server/README.md, "Key status"), before
   * giving the intent a new key: `{ status: "done", result }` with the stored answer (the intent is retired
   * with it, as `reconcile()` does), `{ status: "in_flight" }` (settle again later), `{ status: "fenced" }`
   * (the server never saw the key and now never may: `begin(..., { replace: true })` is then safe), or
   * `{ status: "no_fence", reason }` (the server cannot settle: a new key may make a second order if a
   * request with the old one is still on its way). Rejects `RECONCILE_FAILED` when the server could not
   * be asked, `INVALID_OPTIONS` when no `statusUrl` or `reconcile` is configured, `ABORTED`.
   */
  async settle(options?: Pick<SendOptions, "signal">): Promise<SettleResult> {
    const { reconciler, engine } = this.core.config;
    // settleIntent gives reconcile()'s answer back only when it is "done": a SettleResult.
    return (await reconcilePart()).settleIntent(reconciler, this.request, this.view.key, engine[OPT_ATTEMPT_TIMEOUT_MS] ?? 0, options?.signal, () =>
      this.reconcile(options),
    ) as Promise<SettleResult>;
  }

  private async run(options: SendOptions | undefined, ask: boolean): Promise<SendResult> {
    const { signal, onAttempt, onRetry } = parseSendOptions(options);
    const { core } = this;
    const intentId = this.view.intentId;
    const abortedWaiting = () => new IdempotentFetchError("ABORTED", ABORTED_MESSAGE, { key: this.view.key });
    // One send per intent in this client: a second call waits and shares the first one's answer.
    const turn = await core.inFlight.enter(intentId, signal).catch(() => {
      this.free();
      throw abortedWaiting();
    });
    if (!turn.mine) {
      // The send lock this operation may hold is the other call's to take.
      this.free();
      await this.refresh();
      return turn.result;
    }
    let result: SendResult | undefined;
    try {
      // One sender per intent across tabs: wait for the tab (or worker) that holds it.
      let release = this.adoptLock();
      try {
        if (signal?.aborted) throw INTERRUPTED;
        release ??= await intentLock(core, "send", intentId, signal);
      } catch {
        release?.();
        throw abortedWaiting();
      }
      try {
        result = await this.sendLocked(signal, onAttempt, onRetry, ask);
      } finally {
        release();
      }
      return result;
    } finally {
      turn.finish(result);
      core.sent();
    }
  }

  /** Lets go of what the operation holds (a send lock taken by `begin` for a `send` right after).
   *  Optional: it lets go by itself after 100 ms. Kept from the wasm-bindgen API. */
  free(): void {
    this.adoptLock()?.();
  }

  /** Forgets this intent and its key. Resolves to whether it was stored. */
  discard(): Promise<boolean> {
    return discardIntent(this.core, this.view.intentId);
  }

  private async sendLocked(
    signal: AbortSignal | undefined,
    onAttempt: SendOptions["onAttempt"],
    onRetry: SendOptions["onRetry"],
    ask: boolean,
  ): Promise<SendResult> {
    const { core, sentNow } = this;
    const { intentId } = this.view;
    const unsaved = sentNow?.unsaved;
    this.sentNow = undefined;
    let machine: Machine | undefined;
    let watch: SendWatcher | undefined;
    try {
      const engine = await core.engine();
      // Storage's record (another tab's send may have moved it on), else the one `begin` did not write.
      const loaded =
        (await loadRecord(core, engine, intentId)) ?? (unsaved === undefined ? undefined : decodeRecord(engine, intentId, unsaved));
      if (!loaded) throw notFound(intentId);
      machine = loaded.machine;
      // Read under the send lock: whoever held it before may have got the answer.
      if (this.pendingOnly && machine.get(F_STATE) !== STATE_PENDING) {
        throw new IdempotentFetchError("NOT_FOUND", __DEV__ && `intent "${intentId}" is no longer pending (${STATES[machine.get(F_STATE)]}): nothing sent`, {
          key: loaded.ids.key,
        });
      }
      const persisted: PersistedRequest | undefined = loaded.request;
      const { ids } = loaded;
      // The observer may set `ids.trace`: written with the record before the first attempt (the
      // machine saves before each one).
      watch = core.config.observer?.(ids, this.request, machine.get(F_CREATED_AT));
      const result = await runSend({
        core,
        machine,
        ids,
        persisted,
        request: this.request,
        signal,
        onAttempt,
        onRetry,
        deleteWhenAnswered: sentNow?.deleteWhenAnswered,
        ask,
        watch,
      });
      watch?.(result);
      core.listeners.emit(
        result.ok
          ? { type: "success", intentId, key: result.key, status: result.status, attempts: result.attempts, replayed: result.replayed }
          : {
              type: "failure",
              intentId,
              key: result.key,
              status: result.status,
              code: "HTTP_STATUS",
              message: `the server answered ${result.status}`,
            },
      );
      return result;
    } catch (error) {
      watch?.(undefined, error);
      // Not a failure when an unnamed `client.fetch` finds its record gone (answered by another
      // tab): it begins the request again as a new intent (client.ts `fetch`).
      if (error instanceof IdempotentFetchError && !(sentNow?.deleteWhenAnswered && error.code === "NOT_FOUND")) {
        core.listeners.emit({
          type: "failure",
          intentId,
          key: error.key,
          status: error.lastStatus,
          code: error.code,
          message: error.message,
        });
      }
      throw error;
    } finally {
      if (machine) {
        this.view = viewOf(machine, this.view);
        machine.free();
      }
    }
  }

  /** Re-reads the record (another call sent meanwhile). */
  private async refresh(): Promise<void> {
    try {
      const loaded = await loadRecord(this.core, await this.core.engine(), this.view.intentId);
      if (loaded) {
        this.view = viewOf(loaded.machine, loaded.ids);
        loaded.machine.free();
      }
    } catch {
      // the view stays as it was
    }
  }
}

/** @internal Deletes a record; `true` if there was one (a corrupt one included). */
export async function discardIntent(core: ClientCore, intentId: unknown, key?: string): Promise<boolean> {
  const id = intentIdArg(intentId);
  // The claim first: a claim must never outlive its record (a later begin would resume its key).
  // With `key` (the sweep), a newer key claimed meanwhile keeps both.
  if (!(await dropClaim(core, id, key))) return false;
  let existed = true;
  try {
    existed = (await core.store.get(id)) !== undefined;
  } catch {
    // unreadable: delete it anyway
  }
  try {
    await core.store.delete(id);
  } catch (thrown) {
    throw storageUnavailable(id, thrown);
  }
  core.retired.removed(id);
  return existed;
}

/** @internal An intent id argument: a string (its content is the machine's to check). */
export function intentIdArg(value: unknown): string {
  if (typeof value !== "string") {
    throw invalidRequest(INTENT_ID_MESSAGE);
  }
  return value;
}

function parseSendOptions(options: unknown): SendOptions {
  if (options === undefined || options === null) return {};
  const fields = Fields.of(options, "", "send options", invalidOptions).only(["signal", "onAttempt", "onRetry"]);
  const signal = fields.value("signal");
  if (signal !== undefined && !(signal instanceof AbortSignal)) throw invalidOptions(__DEV__ && "signal must be an AbortSignal");
  return {
    ...(signal ? { signal } : {}),
    onAttempt: fields.typed<NonNullable<SendOptions["onAttempt"]>>("onAttempt", "function"),
    onRetry: fields.typed<NonNullable<SendOptions["onRetry"]>>("onRetry", "function"),
  };
}
