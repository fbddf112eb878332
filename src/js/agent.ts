// `idempotent-fetch-client/agent`: names for the state-changing tool calls of an agent, from what the agent
// runtime controls. A model's tool-call id is minted anew each turn (a re-planned call gets another),
// so it cannot name an intent; the run (or task) id, the tool and the call's arguments can: a
// re-planned call with the same arguments, in any key order, gets the same intent id and key.
//
// The arguments are put in canonical form by RFC 8785 (JSON Canonicalization Scheme) with the
// `canonicalize` package (an optional peer dependency: only this entry needs it), then hashed with
// the driver's SHA-256 (no `crypto.subtle`: the same in every runtime).
/**
 * `idempotent-fetch-client/agent`: {@link toolCallIntent} and {@link toolCallKey}, an intent id and a key
 * for an agent's tool call from the run id, the tool and its canonical arguments, never from the
 * model's tool-call id.
 *
 * @module idempotent-fetch-client/agent
 */

import canonicalize from "canonicalize";
import { sha256 } from "./sha256.js";

/** The arguments' canonical JSON (RFC 8785): the same text for the same values in any key order.
 *  Throws a `TypeError` for what JSON cannot hold (a function, a cycle, `undefined` alone). */
export function canonicalArgs(args: unknown): string {
  const text = canonicalize(args);
  if (text === undefined) throw new TypeError("tool call arguments must be JSON values");
  return text;
}

/** Base64url without padding (RFC 4648, section 5): URL-unreserved characters only. */
function base64url(bytes: Uint8Array): string {
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

const digest = (text: string): string => base64url(sha256(new TextEncoder().encode(text)));

function checked(name: string, value: unknown): string {
  if (typeof value !== "string" || value.length === 0 || value.length > 96 || /[\u0000-\u001f\u007f:]/.test(value)) {
    throw new TypeError(`${name} must be 1 to 96 characters without ":" or control characters`);
  }
  return value;
}

/**
 * The intent id of a tool call: `runId:tool:<hash of the canonical arguments>`. The same run, tool and
 * arguments (in any key order) give the same id, whatever tool-call id the model gave the call; use it
 * as `begin`'s intent id. `runId` is the run, task or conversation id your runtime keeps across
 * restarts (not the model's tool-call id).
 */
export function toolCallIntent(runId: string, tool: string, args: unknown): string {
  return `${checked("runId", runId)}:${checked("tool", tool)}:${digest(canonicalArgs(args))}`;
}

/**
 * A key for the same call (43 URL-unreserved characters: `begin`'s `key` accepts it), for servers
 * that must know the key before anything is sent, e.g. an MCP tool's `idempotencyKey` argument. It is
 * a hash of the run id, the tool and the canonical arguments, so it is only as hard to guess as they
 * are: keep run ids random.
 */
export function toolCallKey(runId: string, tool: string, args: unknown): string {
  return digest(`idempotent-fetch key\n${checked("runId", runId)}\n${checked("tool", tool)}\n${canonicalArgs(args)}`);
}
