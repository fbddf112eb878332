// The command line of `idempotent-fetch-client check`: what it accepts, and a usage error (exit status 2)
// naming the first thing wrong, before any request is sent.

/** What the check sends and where: the parsed command line. */
export interface CheckOptions {
  /** The endpoint: a POST with `Idempotency-Key` and `body` does one piece of work there. */
  url: URL;
  /** The request body, sent byte for byte as given (a JSON text). */
  body: string;
  /** The body of case 2 (same key, another request): `--other-body`, else `body` with one field added. */
  otherBody: string;
  /** Headers sent with every request (`--header "Name: value"`), e.g. the session of a test account. */
  headers: [string, string][];
  /** `--key-status-url`: the key-status endpoint with `{key}` where the key goes, or null. */
  keyStatusUrl: string | null;
  /** `--origin`: the origin of a page that calls the endpoint cross-origin, or null. */
  origin: string | null;
  /** `--json`: one JSON document on stdout instead of the table. */
  json: boolean;
}

/** A command line the check cannot run: the message says what to change. */
export class UsageError extends Error {
  override name = "UsageError";
}

/** The help text (`--help`, and after a usage error). */
export const USAGE = `usage: idempotent-fetch-client check <url> [options]

Sends real requests to <url> (a POST endpoint that takes Idempotency-Key) and prints whether it
honours the protocol the idempotent-fetch client relies on. Every request carries a fresh random key,
so each case creates records there: point it at a test instance, never at production.

options:
  --body JSON              the request body (default {}); it must be one the endpoint accepts (2xx)
  --other-body JSON        another request for the same key (case 2); default: --body with one field added
  --header "Name: value"   sent with every request (repeatable), e.g. "Authorization: Bearer TOKEN"
  --key-status-url URL     the key-status endpoint, {key} where the key goes,
                           e.g. /api/idempotency-keys/{key} (relative to <url>)
  --origin ORIGIN          a page origin that calls <url> cross-origin: checks the CORS answers
  --json                   print one JSON document instead of the table
  -h, --help               this text

exit status: 0 every case passed or was skipped, 1 a case failed, 2 usage error or the endpoint
could not be checked, 3 no case failed but one was inconclusive (it says how to make it conclusive)`;

/** Options that take a value, by flag. */
const VALUED = ["--body", "--other-body", "--header", "--key-status-url", "--origin"] as const;
type Valued = (typeof VALUED)[number];

/** An HTTP field name (RFC 9110 token). */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/** Headers the check writes itself on every request. */
const OWN_HEADERS = ["idempotency-key", "origin", "content-length", "host"];

function json(flag: string, text: string): string {
  try {
    JSON.parse(text);
  } catch (error) {
    throw new UsageError(`${flag} is not JSON (${error instanceof Error ? error.message : String(error)}): ${text}`);
  }
  return text;
}

function header(text: string): [string, string] {
  const colon = text.indexOf(":");
  const name = colon > 0 ? text.slice(0, colon).trim() : "";
  const value = colon > 0 ? text.slice(colon + 1).trim() : "";
  if (!TOKEN.test(name) || /[\r\n\0]/.test(value)) throw new UsageError(`--header wants "Name: value", got ${JSON.stringify(text)}`);
  if (OWN_HEADERS.includes(name.toLowerCase())) throw new UsageError(`--header ${name}: the check sets ${name} itself`);
  return [name, value];
}

function endpoint(text: string): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new UsageError(`<url> is not an absolute URL: ${text}`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new UsageError(`<url> must be http: or https:, got ${url.protocol}`);
  return url;
}

function statusTemplate(text: string, base: URL): string {
  if (!text.includes("{key}")) throw new UsageError(`--key-status-url must hold {key} where the key goes, got ${text}`);
  try {
    new URL(text.replaceAll("{key}", "k"), base);
  } catch {
    throw new UsageError(`--key-status-url is not a URL: ${text}`);
  }
  return text;
}

function origin(text: string): string {
  let url: URL | null = null;
  try {
    url = new URL(text);
  } catch {
    // Reported below.
  }
  if (!url || (url.protocol !== "http:" && url.protocol !== "https:") || url.origin !== text.replace(/\/$/, "")) {
    throw new UsageError(`--origin wants an origin such as https://page.example (scheme, host, port; no path), got ${text}`);
  }
  return url.origin;
}

/** `body` with one field added, when it is a JSON object: bytes the fingerprint must tell apart. */
function anotherBody(body: string, marker: string): string {
  const value: unknown = JSON.parse(body);
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new UsageError("--body is not a JSON object, so the check cannot derive another request from it: give --other-body too");
  }
  return JSON.stringify({ ...value, idempotencyCheck: marker });
}

/**
 * Parses the arguments after `check` (`--flag value` or `--flag=value`). Returns null for `--help`.
 * `marker` is the random value the derived other body carries.
 */
export function parseArgs(argv: readonly string[], marker: string): CheckOptions | null {
  const valued = new Map<Valued, string[]>();
  const positional: string[] = [];
  let asJson = false;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? "";
    if (arg === "-h" || arg === "--help") return null;
    if (arg === "--json") {
      asJson = true;
      continue;
    }
    if (!arg.startsWith("-")) {
      positional.push(arg);
      continue;
    }
    const equals = arg.indexOf("=");
    const flag = equals > 0 ? arg.slice(0, equals) : arg;
    const known = VALUED.find((name) => name === flag);
    if (!known) throw new UsageError(`unknown option ${flag}`);
    const value = equals > 0 ? arg.slice(equals + 1) : argv[++i];
    if (value === undefined) throw new UsageError(`${flag} needs a value`);
    if (known !== "--header" && valued.has(known)) throw new UsageError(`${flag} given twice`);
    valued.set(known, [...(valued.get(known) ?? []), value]);
  }
  if (positional.length !== 1) {
    throw new UsageError(positional.length ? `one <url>, got ${positional.length}: ${positional.join(" ")}` : "missing <url>");
  }
  const url = endpoint(positional[0] ?? "");
  const one = (flag: Valued): string | undefined => valued.get(flag)?.[0];
  const body = json("--body", one("--body") ?? "{}");
  const other = one("--other-body");
  const otherBody = other === undefined ? anotherBody(body, marker) : json("--other-body", other);
  if (otherBody === body) throw new UsageError("--other-body is the same as --body: case 2 needs another request");
  const status = one("--key-status-url");
  const page = one("--origin");
  return {
    url,
    body,
    otherBody,
    headers: (valued.get("--header") ?? []).map(header),
    keyStatusUrl: status === undefined ? null : statusTemplate(status, url),
    origin: page === undefined ? null : origin(page),
    json: asJson,
  };
}
