// Phased work behind Node's HTTP objects (Express 5 takes the handler as it is): the key and the body read
// as the endpoint reads them, then begin, the app's flow, and the answer sent.
import type { IncomingMessage, ServerResponse } from "node:http";

import * as core from "./core.js";
import type { Answer } from "./core.js";
import { type BodyLimits, keyHeader, parseJson, readBody, sendAnswer } from "./http.js";
import { type AtomicPhases, type Held, KeyBusyError, LeaseLostError } from "./phases.js";
import { answered, countDecision, keyHashAttribute, keyInFlight, type SpanHandle, traced } from "./telemetry.js";

/** Options of {@link phasedHandler}. */
export interface PhasedOptions extends BodyLimits {
  /** The scope of the request's key (its account); the phases' scope when absent or undefined. */
  scope?: (req: IncomingMessage) => string | undefined;
  /** Where a flow's failure is reported (the client gets 500, its row is released). @defaultValue `console.error` */
  onError?: (error: unknown) => void;
}

/**
 * A request handler (`(req, res)`, for `http.createServer` or an Express 5 route) running phased work: the
 * key first (400), the body within the limits and as JSON (413, 408, 400), then
 * {@link AtomicPhases.begin}; a key that needs no work gets its answer (replay, 409, 422, 410), a held one
 * runs `flow`, which resumes at `held.point` and returns {@link AtomicPhases.finish}'s answer. A flow that
 * throws has its row released (the retry or the completer takes it over at its point) and answers 500; one
 * whose lease was taken over answers 409.
 *
 * ```ts
 * app.post("/api/payments", phasedHandler(phases, ({ held, json }) => drive(held, json)));
 * ```
 */
export function phasedHandler<Tx>(
  phases: AtomicPhases<Tx>,
  flow: (context: { held: Held; json: unknown; req: IncomingMessage }) => Promise<Answer>,
  options: PhasedOptions = {},
): (req: IncomingMessage, res: ServerResponse) => Promise<void> {
  const onError = options.onError ?? ((error: unknown) => console.error("idempotent-endpoint:", error));
  return async (req, res) => {
    const path = new URL(req.url ?? "/", "http://localhost").pathname;
    const method = req.method ?? "POST";
    // The request's span, as the endpoint's (endpoint.ts `run`): a server span continuing the incoming trace.
    const answer = await traced(
      method,
      { "http.request.method": method, "url.path": path },
      async (span) => {
        const given = await answerPhased(phases, req, path, flow, options, onError, span);
        answered(span, given.status);
        return given;
      },
      { kind: "server", carrier: req.headers },
    );
    sendAnswer(res, answer);
  };
}

/** The decision on the request's span and in `idempotency_decisions`. */
function decided(span: SpanHandle, decision: "fresh" | core.Decision): void {
  span.set({ "idempotency.decision": decision });
  countDecision(decision);
}

async function answerPhased<Tx>(
  phases: AtomicPhases<Tx>,
  req: IncomingMessage,
  path: string,
  flow: (context: { held: Held; json: unknown; req: IncomingMessage }) => Promise<Answer>,
  options: PhasedOptions,
  onError: (error: unknown) => void,
  span: SpanHandle,
): Promise<Answer> {
  const keyed = core.keyFromHeader(keyHeader(req));
  if ("answer" in keyed) return keyed.answer;
  span.set(keyHashAttribute(span, keyed.key));
  const body = await readBody(req, options);
  if (!(body instanceof Uint8Array)) return body;
  const parsed = parseJson(req, body);
  if ("answer" in parsed) return parsed.answer;
  const scope = options.scope?.(req);
  let held: Held | undefined;
  try {
    return await keyInFlight(async () => {
      const begun = await phases.begin({ method: req.method ?? "POST", path, keyHeader: keyHeader(req), body, ...(scope === undefined ? {} : { scope }) });
      if (begun.held === undefined) {
        if (begun.outcome !== "refused") decided(span, begun.outcome);
        return begun.answer;
      }
      // A key taken over from a holder whose lease ran out is work resumed, counted as fresh work too.
      decided(span, "fresh");
      held = begun.held;
      return await flow({ held, json: parsed.json, req });
    });
  } catch (error) {
    if (error instanceof LeaseLostError) return core.inFlightAnswer();
    if (error instanceof KeyBusyError) {
      // The step wrote nothing; the key is free for the retry this 409 asks for.
      if (held !== undefined) await phases.release(held).catch(onError);
      return core.inFlightAnswer();
    }
    onError(error);
    if (held !== undefined) await phases.release(held).catch(onError);
    return core.problemAnswer("internal");
  }
}
