// `idempotent-fetch-client/tanstack`: a `mutationFn` for TanStack Query (React, Vue, Svelte, Solid: the
// function is the same in each) whose every call for one intent sends with one key. TanStack's
// `retry` calls the function again, a paused mutation resumed after a reload calls it again, a
// remount or a second click calls it again: each names the same intent (from the variables), so
// each resumes the same key instead of minting one.
//
// Type imports only from the core; nothing from TanStack (the function is plain).
/**
 * `idempotent-fetch-client/tanstack`: {@link idempotentMutation}, a TanStack Query `mutationFn` whose
 * retries, resumed and repeated calls keep one key per intent; {@link retryUnanswered}, a `retry`
 * that does not retry a definite answer; {@link choose}, the shopper's way out of a changed cart.
 *
 * @module idempotent-fetch-client/tanstack
 */

import type { IdempotentClient } from "./client.js";
import type { RetryEvent } from "./events.js";
import type { IntentRequest } from "./request.js";
import type { SendResult } from "./results.js";
import { type AnswerFor, beginWith, codeOf, type MismatchPolicy } from "./watch.js";

export type { AnswerFor, MismatchPolicy } from "./watch.js";

/** Options of {@link idempotentMutation}. */
export interface MutationOptions<TVariables, TData> {
  /** The client whose storage holds the intents (made once, outside components). */
  client: IdempotentClient;
  /** The intent a call is, from its variables: what the user asked for, named so that asking again
   *  (a retry, a reload, a second click) gives the same name, e.g. `` (cart) => `checkout:${cart.id}` ``.
   *  A new name is a new order. */
  intent: (variables: TVariables) => string;
  /** The request of a call. */
  request: (variables: TVariables) => IntentRequest;
  /** Reads a 2xx answer's body into the mutation's data. Default: JSON, or null. */
  read?: (response: Response) => Promise<TData>;
  /** When the request differs from the one the intent was begun with (see `MismatchPolicy`; a
   *  mutation has no phase to ask the person in, so not `"ask"`). Default `"error"`. */
  onMismatch?: Exclude<MismatchPolicy, "ask">;
  /** A key the app brings for a call (`begin`'s `key`), e.g. one the server issued with the cart. */
  key?: (variables: TVariables) => string;
  /** Called before each wait between attempts (`delayMs`, `reason`): the UI's countdown. The mutation
   *  stays pending meanwhile, so TanStack's own state cannot show it. */
  onRetry?: (event: RetryEvent, variables: TVariables) => void;
  /** Called with each answer before the mutation resolves or rejects with it: which request it answers
   *  (`"earlier"`: the request the intent was begun with before the cart changed, see {@link choose}). */
  onAnswer?: (answerFor: AnswerFor, variables: TVariables) => void;
}

/** The shopper's way out of a changed cart (see {@link choose}). */
export type Choice = "replace" | "resume" | "discard";

const choices = new WeakMap<object, Choice>();

/**
 * The variables of one call that meets a changed request with the shopper's choice. A call whose request
 * differs from the one its intent was begun with (a reload rebuilt the cart) rejects with
 * `INTENT_MISMATCH` (`onMismatch: "error"`, the default); the page offers the ways out, each a
 * `mutate(choose(cart, …))`: `"replace"` settles the earlier key at the server and sends this request
 * under a new key, `"resume"` sends the earlier request with its key (the client's `persistRequest`),
 * `"discard"` settles the earlier key and forgets the intent (the call rejects with
 * {@link IntentDiscarded}). Whichever was chosen, an order the server had already made for the earlier
 * request is the answer (`onAnswer` says `"earlier"`). Returns a copy of `variables`; the choice holds
 * for calls with that copy (TanStack's retries of it included).
 */
export function choose<T extends object>(variables: T, choice: Choice): T {
  const copy = { ...variables };
  choices.set(copy, choice);
  return copy;
}

/** The mutation's error after {@link choose}`(…, "discard")`: the earlier intent was settled and forgotten,
 *  nothing was sent; the next call begins the request given then. */
export class IntentDiscarded extends Error {
  /** @param intentId the intent discarded */
  constructor(intentId: string) {
    super(`the intent ${intentId} was discarded: nothing was sent`);
    this.name = "IntentDiscarded";
  }
}

/** The mutation's error for a definite answer that is not 2xx (a 4xx, or a failure replayed):
 *  the order was answered, retrying would get the same answer. */
export class AnsweredError extends Error {
  /** The answer (`status`, `response`, `replayed`, `key`...). */
  readonly result: SendResult;
  /** `read` of the answer's body. */
  readonly data: unknown;
  /** @param result the answer; @param data its body as read */
  constructor(result: SendResult, data: unknown) {
    super(`the server answered ${result.status}`);
    this.name = "AnsweredError";
    this.result = result;
    this.data = data;
  }
}

/** What {@link idempotentMutation} returns: the options to pass to `useMutation` (or spread into
 *  yours). */
export interface IdempotentMutation<TVariables, TData> {
  /** Sends `request(variables)` as the intent `intent(variables)`; resolves the 2xx answer's data. */
  mutationFn: (variables: TVariables) => Promise<TData>;
  /** `retryUnanswered(3)`: a `retry` given after the spread replaces it (a plain number there would
   *  retry definite answers too). */
  retry: (failureCount: number, error: unknown) => boolean;
}

const readJson = (response: Response): Promise<never> => response.json().catch(() => null) as Promise<never>;

/**
 * `{ mutationFn, retry }` for `useMutation` or `setMutationDefaults`: each call begins (or resumes)
 * `intent(variables)` with `request(variables)` and sends it until a definite answer. Resolves a 2xx
 * answer's data; rejects with {@link AnsweredError} for a definite non-2xx answer and with the
 * client's `IdempotentFetchError` when there is no definite answer (the key is kept: the next call
 * resumes it, and `retry`, {@link retryUnanswered}, makes that call up to three times). Name the types
 * (`idempotentMutation<Cart, Order>(…)`) or annotate `intent`'s parameter: the other functions and
 * `mutate` take them from there.
 */
export function idempotentMutation<TVariables, TData = unknown>(
  options: MutationOptions<TVariables, TData>,
): IdempotentMutation<TVariables, TData> {
  const { client, intent, request, read = readJson, onMismatch = "error", key, onRetry, onAnswer } = options;
  return {
    retry: retryUnanswered(3),
    async mutationFn(variables) {
      const wanted = request(variables);
      const id = intent(variables);
      const chosen = typeof variables === "object" && variables !== null ? choices.get(variables) : undefined;
      const { begun, answerFor } = await beginWith(client, id, wanted, chosen ?? onMismatch, new AbortController().signal, () => {}, key?.(variables));
      if (begun === null) throw new IntentDiscarded(id);
      const result = "send" in begun ? await begun.send(onRetry ? { onRetry: (event) => onRetry(event, variables) } : {}) : begun;
      onAnswer?.(answerFor, variables);
      const data = await read(result.response.clone());
      if (!result.ok) throw new AnsweredError(result, data);
      return data;
    },
  };
}

/**
 * A TanStack `retry` option: retries (up to `times`) only a send that ran out of attempts without a
 * definite answer (`RETRIES_EXHAUSTED`), with the same key; an {@link AnsweredError}, an abort or a
 * bad request is never retried.
 */
export function retryUnanswered(times: number): (failureCount: number, error: unknown) => boolean {
  return (failureCount, error) => failureCount < times && codeOf(error) === "RETRIES_EXHAUSTED";
}
