// The completer: finishes phased work a crash left (a holder that never came back), without waiting for
// the client's retry. It takes over unfinished rows whose lease ran out (the Rust library's `unfinished`)
// and hands each to the app's own driver, which resumes at the row's recovery point. Each completion runs in
// a span (`idempotency.complete`) that is a child of the `traceparent` the row kept from the request that
// claimed it, and linked to it, as an outbox delivery continues its message's (outbox.ts): the work a crash
// left reads in the trace of the request that started it.
import { type AtomicPhases, type Held, LeaseLostError } from "./phases.js";
import { sleep } from "./sleep.js";
import { keyHashAttribute, traced } from "./telemetry.js";

/** Options of {@link phasesCompleter}. */
export interface CompleterOptions {
  /** Rows taken over per pass. @defaultValue 16 */
  batch?: number;
  /** How long the completer sleeps after a pass that took less than a full batch, in milliseconds. @defaultValue 1000 */
  pollMs?: number;
  /** Where a failed pass or a failed completion is reported (its row is released and taken again later). @defaultValue nothing */
  onError?: (error: unknown, held?: Held) => void;
}

/** A completer (one per process is enough; several processes may run one each). */
export interface PhasesCompleter {
  /** One pass: takes over up to `batch` rows and completes each in turn; resolves to how many it took. */
  pass(): Promise<number>;
  /** Passes until `signal` aborts (a pass in progress finishes first). */
  run(signal: AbortSignal): Promise<void>;
}

/**
 * A completer over `phases`: each row it takes over is given to `complete`, the app's driver, which resumes
 * at `held.point` and ends with {@link AtomicPhases.finish} (or {@link AtomicPhases.abandon} at
 * `STARTED`, where no request body exists to start from). A driver that throws has its row released,
 * so the next pass (or the client's retry) takes it again.
 *
 * ```ts
 * const completer = phasesCompleter(phases, (held) => drive(held));   // drive: the same code the route runs
 * void completer.run(stop.signal);
 * ```
 */
export function phasesCompleter<Tx>(phases: AtomicPhases<Tx>, complete: (held: Held) => Promise<unknown>, options: CompleterOptions = {}): PhasesCompleter {
  const batch = Math.max(1, options.batch ?? 16);
  const pollMs = options.pollMs ?? 1000;
  const onError = options.onError ?? (() => undefined);

  async function pass(): Promise<number> {
    const taken = await phases.unfinished(batch);
    for (const held of taken) {
      try {
        await traced(
          "idempotency.complete",
          { "idempotency.recovery_point": held.point },
          (span) => {
            span.set(keyHashAttribute(span, held.key));
            return complete(held);
          },
          { traceparent: held.traceparent },
        );
      } catch (error) {
        onError(error, held);
        if (!(error instanceof LeaseLostError)) await phases.release(held).catch((e: unknown) => onError(e, held));
      }
    }
    return taken.length;
  }

  async function run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      let took = 0;
      try {
        took = await pass();
      } catch (error) {
        onError(error);
      }
      if (took < batch) await sleep(pollMs, signal);
    }
  }

  return { pass, run };
}
