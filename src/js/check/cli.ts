// `idempotent-fetch-client check <url>`: the command line the package's bin runs (Node 18 or later, its
// global fetch; no dependency). Exit status 0 when every case passed or was skipped, 1 when one
// failed, 2 on a usage error or an endpoint that could not be checked, 3 when none failed but one was
// inconclusive (its requests did not exercise what it checks: not a pass a script may take for one).
import { webcrypto } from "node:crypto";

import { type CheckOptions, parseArgs, USAGE, UsageError } from "./args.js";
import { CannotCheck, runCheck } from "./cases.js";
import { asJson, asTable } from "./table.js";

/** Exit statuses. */
const PASSED = 0;
const FAILED = 1;
const USAGE_ERROR = 2;
const INCONCLUSIVE = 3;

/** Runs the command with the arguments after the program name; resolves to the exit status. */
async function main(argv: readonly string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === "-h" || command === "--help") {
    console.log(USAGE);
    return PASSED;
  }
  let options: CheckOptions | null;
  try {
    if (command !== "check") throw new UsageError(command === undefined ? "missing the command: check" : `unknown command ${command}: the one command is check`);
    options = parseArgs(rest, webcrypto.randomUUID());
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    console.error(`idempotent-fetch: ${error.message}\n\n${USAGE}`);
    return USAGE_ERROR;
  }
  if (options === null) {
    console.log(USAGE);
    return PASSED;
  }
  console.error(`idempotent-fetch-client check: sending real requests to ${options.url.href}, each with a fresh key: every case creates records there (orders, charges, emails). Use a test instance, never production.`);
  try {
    const rows = await runCheck(options);
    console.log(options.json ? asJson(options.url, rows) : asTable(options.url, rows));
    if (rows.some((row) => row.verdict === "FAIL")) return FAILED;
    return rows.some((row) => row.verdict === "INCONCLUSIVE") ? INCONCLUSIVE : PASSED;
  } catch (error) {
    if (!(error instanceof CannotCheck)) throw error;
    console.error(`idempotent-fetch-client check: cannot check ${options.url.href}: ${error.message}`);
    return USAGE_ERROR;
  }
}

main(process.argv.slice(2)).then(
  (status) => {
    process.exitCode = status;
  },
  (error: unknown) => {
    console.error(`idempotent-fetch-client check: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    process.exitCode = USAGE_ERROR;
  },
);
