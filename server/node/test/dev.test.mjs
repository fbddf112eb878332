// `npx idempotent-endpoint dev` as a newcomer runs it (the package's bin, a child process): it prints its
// URL, passes the browser package's own conformance check (`idempotent-fetch-client check`, from the
// built pkg/), and with --faults it fails and loses answers without ever doing an order twice.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, describe, it } from "node:test";
import { fileURLToPath } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const CLI = path.join(HERE, "../dist/cli.js");
const PKG = process.env.IF_PKG ?? path.join(HERE, "../../../pkg");
const CHECK = path.join(PKG, "bin/check.mjs");
const running = [];

/** Starts `idempotent-endpoint dev ...args` on a free port; resolves to its URLs once it printed them. */
function startDev(...args) {
  const dir = mkdtempSync(path.join(tmpdir(), "idempotent-endpoint-dev-"));
  const child = spawn(process.execPath, [CLI, "dev", "--port", "0", "--data", path.join(dir, "data"), ...args], { stdio: ["ignore", "pipe", "inherit"] });
  running.push({ child, dir });
  return new Promise((resolve, reject) => {
    let out = "";
    child.on("error", reject);
    child.on("exit", (code) => reject(new Error(`dev exited ${code} before printing its URL: ${out}`)));
    child.stdout.on("data", (d) => {
      out += d;
      const url = /POST (http:\/\/127\.0\.0\.1:\d+\/api\/orders)/.exec(out)?.[1];
      const keyStatus = /key status: (\S+)/.exec(out)?.[1];
      if (url && keyStatus) resolve({ url, keyStatus, out });
    });
  });
}

after(() => {
  for (const { child, dir } of running) {
    child.kill("SIGTERM");
    rmSync(dir, { recursive: true, force: true });
  }
});

describe("idempotent-endpoint dev", () => {
  it("prints its URL and passes `idempotent-fetch-client check` with key status and CORS", async () => {
    assert.ok(existsSync(CHECK), `${CHECK} is missing: build the browser package (cargo xtask build)`);
    const { url, keyStatus, out } = await startDev();
    assert.match(out, /idempotent-fetch-client check/);
    const check = spawn(process.execPath, [CHECK, "check", url, "--body", '{"items":[{"sku":"mug","qty":1}]}', "--key-status-url", keyStatus, "--origin", "http://localhost:5173"], { stdio: ["ignore", "pipe", "pipe"] });
    let report = "";
    check.stdout.on("data", (d) => (report += d));
    check.stderr.on("data", (d) => (report += d));
    const code = await new Promise((resolve) => check.on("exit", resolve));
    assert.equal(code, 0, report);
    assert.match(report, /8 passed, 0 failed, 0 skipped/, report);
  });

  it("answers its own refusals as the library's problems: an order that is not an object (stored, replayed), an unknown route", async () => {
    const { url } = await startDev("--work-ms", "0");
    const key = randomUUID();
    const post = () => fetch(url, { method: "POST", headers: { "content-type": "application/json", "idempotency-key": key }, body: "[1]" });
    const first = await post();
    assert.equal(first.status, 400);
    assert.equal(first.headers.get("content-type"), "application/problem+json");
    const problem = await first.json();
    assert.deepEqual([problem.type, problem.code, problem.status], ["https://idempotent-fetch.dev/problems/invalid-order", "invalid-order", 400]);
    const again = await post();
    assert.equal(again.headers.get("idempotent-replayed"), "true");
    assert.deepEqual(await again.json(), problem);
    const missing = await fetch(new URL("/nowhere", url));
    assert.equal(missing.status, 404);
    assert.equal(missing.headers.get("content-type"), "application/problem+json");
    assert.equal((await missing.json()).code, "not-found");
  });

  it("--faults: 503s and lost answers, retried with the same keys: every order exactly once", async () => {
    const { url } = await startDev("--faults", "--work-ms", "0");
    const keys = Array.from({ length: 40 }, () => randomUUID());
    let failed = 0;
    let lost = 0;
    for (const key of keys) {
      for (let attempt = 0; ; attempt++) {
        assert.ok(attempt < 50, `key ${key} never got a definite answer`);
        let answer;
        try {
          answer = await fetch(url, { method: "POST", headers: { "content-type": "application/json", "idempotency-key": key }, body: JSON.stringify({ key }) });
        } catch {
          lost++;
          continue;
        }
        if (answer.status === 503) {
          assert.equal(answer.headers.get("retry-after"), "1");
          assert.equal((await answer.json()).type, "https://idempotent-fetch.dev/problems/fault");
          failed++;
          continue;
        }
        assert.equal(answer.status, 201, await answer.text());
        break;
      }
    }
    assert.ok(failed > 0 && lost > 0, `faults injected: ${failed} 503s, ${lost} lost answers`);
    const { count } = await (await fetch(url)).json();
    assert.equal(count, keys.length, "one order per key, none twice, none lost");
  });
});
