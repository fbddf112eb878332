// What every integration must pass, over HTTP: the browser package's own conformance check
// (`idempotent-fetch-client check`, from the built pkg/), and the crash test: a handler that throws after
// writing its business row must leave no row (its row rolls back with the key row).
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const PKG = process.env.IF_PKG ?? path.join(HERE, "../../../../pkg");
const CHECK = path.join(PKG, "bin/check.mjs");

/** The body every conformance app accepts; a handler given `CRASH` writes its row, then throws. */
export const BODY = JSON.stringify({ sku: "mug" });
export const CRASH = "crash";

/** Runs `check` against `url` (key status at `keyStatus`, relative to it); resolves to its exit code and report. */
export async function runCheck(url, keyStatus) {
  assert.ok(existsSync(CHECK), `${CHECK} is missing: build the browser package (cargo xtask build)`);
  const check = spawn(process.execPath, [CHECK, "check", url, "--body", BODY, "--key-status-url", keyStatus], { stdio: ["ignore", "pipe", "pipe"] });
  let report = "";
  check.stdout.on("data", (d) => (report += d));
  check.stderr.on("data", (d) => (report += d));
  const code = await new Promise((resolve) => check.on("exit", resolve));
  return { code, report };
}

/** Asserts `check` passes every case against `url` but CORS (skipped: the app serves its own pages, no --origin). */
export async function assertCheckPasses(url, keyStatus) {
  const { code, report } = await runCheck(url, keyStatus);
  assert.equal(code, 0, report);
  assert.match(report, /7 passed, 0 failed, 1 skipped/, report);
  assert.match(report, /CORS for a cross-origin page\s+SKIP\s+no --origin given/, report);
}

/**
 * The crash test: a request whose handler writes its row and then throws. Resolves to how many business
 * rows it left (`rows(sku)` counts them); a correct integration leaves none and answers 500.
 */
export async function crashLeaves(url, rows) {
  const sku = `${CRASH}-${randomUUID()}`;
  const answer = await fetch(url, { method: "POST", headers: { "content-type": "application/json", "idempotency-key": randomUUID() }, body: JSON.stringify({ sku }) });
  assert.equal(answer.status, 500, await answer.text());
  return rows(sku);
}
