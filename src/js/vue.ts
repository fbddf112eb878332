// `idempotent-fetch-client/vue`: the store of watch.ts as a composable: a `shallowRef` holding the intent's
// snapshot, renewed on each change, subscribed while the component is mounted (nothing runs in
// server rendering). A reactive `intentId` (a ref or a getter) moves to the new intent's store.
//
// Type imports only from the core, `vue` left to the app (an optional peer dependency).
/**
 * `idempotent-fetch-client/vue`: {@link useIdempotentAction}, a composable for a button whose click must
 * happen once. Vue 3.3 or later; the app passes its own client.
 *
 * @module idempotent-fetch-client/vue
 */

import {
  type MaybeRefOrGetter,
  type ShallowRef,
  getCurrentInstance,
  getCurrentScope,
  onBeforeUnmount,
  onMounted,
  onScopeDispose,
  shallowRef,
  toValue,
  watch,
} from "vue";
import type { IntentRequest } from "./request.js";
import { type ChangeControls, type IntentSnapshot, type IntentStore, type WatchOptions, watchIntent } from "./watch.js";

export type { AnswerFor, ChangeControls, IntentPhase, IntentSnapshot, IntentSnapshotFields, MismatchPolicy, NotRetryingSnapshot, RetryingSnapshot, WatchOptions } from "./watch.js";

/** What `useIdempotentAction` returns (with `replace`, `resume` and `discard` for the phase `changed`). */
export interface IdempotentAction<T> extends ChangeControls {
  /** The intent's snapshot (`state.value.phase`, `.key`, `.retryInMs`…; in a template `state.phase`
   *  once destructured). */
  state: Readonly<ShallowRef<IntentSnapshot<T>>>;
  /** Begins (or resumes) the intent and sends it; a no-op while a send runs. */
  run: () => void;
  /** Aborts the running send (`error` becomes `ABORTED`; the key is kept). */
  abort: () => void;
}

/**
 * A state-changing request sent once per intent: `run()` begins `intentId` with `request` (read when
 * the send starts: a value, a ref or a getter such as a `computed`) or resumes it (same key), and
 * sends it until a definite answer. Call it in `setup` (or `<script setup>`); outside a component it
 * subscribes at once and stops with the effect scope.
 */
export function useIdempotentAction<T = unknown>(
  intentId: MaybeRefOrGetter<string>,
  request: MaybeRefOrGetter<IntentRequest>,
  options: WatchOptions<T>,
): IdempotentAction<T> {
  const make = (id: string) => watchIntent<T>(id, () => toValue(request), options);
  let store: IntentStore<T> = make(toValue(intentId));
  const state = shallowRef(store.getSnapshot());
  let unsubscribe: (() => void) | undefined;
  const start = () => {
    unsubscribe?.();
    state.value = store.getSnapshot();
    unsubscribe = store.subscribe(() => (state.value = store.getSnapshot()));
  };
  const stop = () => {
    unsubscribe?.();
    unsubscribe = undefined;
  };
  watch(
    () => toValue(intentId),
    (id) => {
      const live = unsubscribe !== undefined;
      stop();
      store = make(id);
      state.value = store.getSnapshot();
      if (live) start();
    },
  );
  if (getCurrentInstance()) {
    onMounted(start);
    onBeforeUnmount(stop);
  } else {
    start();
    if (getCurrentScope()) onScopeDispose(stop);
  }
  return {
    state,
    run: () => store.run(),
    abort: () => store.abort(),
    replace: () => store.replace(),
    resume: () => store.resume(),
    discard: () => store.discard(),
  };
}
