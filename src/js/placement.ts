// Where the key goes when the server does not read a header: a field of a JSON object body (Square's
// `idempotency_key`) or a GraphQL variable (Saleor's `idempotencyKey`). The body is rewritten from
// the request's own bytes each send, the same way each time, so every attempt carries the same bytes;
// the fingerprint is over the body without the key (the key is not known before `begin` decides it,
// and a reload must match the same request).

import { IdempotentFetchError } from "./errors.js";
import type { PreparedRequest } from "./request.js";

/** A body the placement cannot take. */
const invalidRequest = (message: string | false) => new IdempotentFetchError("INVALID_REQUEST", message);

/** `keyIn`: the key's place in the request. Default `"header"` (`headerName`). */
export type KeyIn =
  | "header"
  | {
      /** The top-level field of the JSON object body that carries the key (`idempotency_key`). */
      json: string;
    }
  | {
      /** The GraphQL variable that carries the key (`idempotencyKey`). */
      graphqlVariable: string;
    };

/** The parsed `keyIn`: the body field or GraphQL variable, undefined for the header. */
export interface Placement {
  /** A top-level field of the JSON object body. */
  field?: string;
  /** A field of the GraphQL request's `variables` object (made if absent). */
  variable?: string;
}

/** The request with the key written into its body (JSON re-serialized from the parsed body), or
 *  INVALID_REQUEST when the body is not what the placement needs: a JSON object, and for GraphQL
 *  `variables` absent or an object. Called by `begin` with a stand-in key to check the body. */
export function placeKey(request: PreparedRequest, key: string, placement: Placement): PreparedRequest {
  const what = __DEV__ && (placement.field !== undefined ? `keyIn.json "${placement.field}"` : `keyIn.graphqlVariable "${placement.variable}"`);
  let body: unknown;
  try {
    body = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(request.body?.bytes));
  } catch {
    body = undefined;
  }
  const isObject = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value);
  if (!isObject(body)) throw invalidRequest(__DEV__ && `${what} needs a JSON object body`);
  // Re-serialized, a number keeps its value unless it is an integer beyond 2^53 (an id or an amount
  // in minor units would change): refused rather than sent altered.
  const exact = (value: unknown): boolean =>
    typeof value === "number" ? !Number.isInteger(value) || Number.isSafeInteger(value) : typeof value !== "object" || value === null || Object.values(value).every(exact);
  if (!exact(body)) throw invalidRequest(__DEV__ && `${what}: the body holds an integer beyond 2^53, which JSON.parse cannot keep exactly; send it as a string`);
  let target = body;
  if (placement.variable !== undefined) {
    const variables = body.variables ?? {};
    if (!isObject(variables)) throw invalidRequest(__DEV__ && `${what} needs the body's "variables" to be an object`);
    target = body.variables = variables;
  }
  target[placement.field ?? (placement.variable as string)] = key;
  const bytes = new TextEncoder().encode(JSON.stringify(body));
  return { ...request, body: { bytes, contentType: request.body?.contentType ?? "application/json" } };
}
