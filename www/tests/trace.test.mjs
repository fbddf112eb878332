// The demo page traced, as `cargo xtask demo` runs it: the real server exporting its spans over OTLP/HTTP to
// a real `trace-receiver`, a real `payment-provider`, and the page opened with `?traces=` (its spans exported
// to the same receiver by the OpenTelemetry SDK, www/tracing.mjs). A payment begun while the server answers
// 503, the page reloaded while the client waits to retry, more 503s, then the server recovers: the page's
// timeline, drawn from the receiver, is one trace holding one intent, its attempts (resend_count absent on
// the first, then 1, 2, …), the server's request span of each attempt under it, the phases, the
// provider call with the hash of the key derived for it, and under that call the provider's own server span
// (the provider exports to the receiver too). Then the demo's crash: the server ends right after the
// provider charged, comes back (restarted as `cargo xtask demo` does) answering the page 503 while the key's
// lease runs out, and its completer finishes the key: the completer's span is in the payment's trace, and
// so are the confirmation's outbox delivery and the mail receiver's receipt (the receiver exports too).
//
// Needs: the server binaries (IF_SERVER_BIN or target/server; payment-provider and trace-receiver beside
// it), the package and the page's tracing bundle (www/tracing.js: `node www/build-tracing.mjs`; the test
// steps of cargo xtask build it), the engine's browser.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";

import { collectPageErrors, engine, engineName, launchBrowser, timeoutScale } from "../../tests/support/browsers.mjs";
import { pkgDir, pkgMissing, root } from "../../tests/support/paths.mjs";
import { startReferenceServer, startService, startSupervisedServer } from "../../tests/support/reference-server.mjs";

const screenshotDir = path.join(process.env.IF_SCREENSHOT_DIR ?? path.join(root, "target", "screenshots"), engine === "chromium" ? "" : engine);
const www = process.env.IF_WWW_DIR ?? path.join(root, "www");
const TEST_TIMEOUT_MS = 90_000 * timeoutScale;

let browser;
let receiver;
let provider;
let server;

/** What a trace shows of a key: the first 16 hex digits of its SHA-256. */
const keyHash = (key) => createHash("sha256").update(key).digest("hex").slice(0, 16);

before(async () => {
  const bundle = path.join(www, "tracing.js");
  const missing = existsSync(bundle) ? null : `${bundle} is missing: node www/build-tracing.mjs (cargo xtask test builds it)`;
  browser = await launchBrowser({ what: `the traced demo test in ${engineName}`, also: [pkgMissing(), missing] });
  receiver = await startService("trace-receiver", { args: [], db: false, label: "trace-receiver" });
  provider = await startService("payment-provider", { label: "trace-provider", args: ["--enable-faults", "--otlp-endpoint", receiver.url] });
  server = await startReferenceServer({
    www, pkg: pkgDir, label: "trace", args: ["--provider-url", provider.url, "--otlp-endpoint", receiver.url],
  });
  mkdirSync(screenshotDir, { recursive: true });
});

after(async () => {
  await browser?.close().catch(() => {});
  await server?.stop();
  await provider?.stop();
  await receiver?.stop();
});

/** The timeline's rows, as the page shows them now. */
const rows = (page) => page.evaluate(() => [...document.querySelectorAll("#timeline .tl-row")].map((r) => ({ ...r.dataset, text: r.textContent })));

test("503s, a reload while waiting to retry, then 201: the page's timeline is one trace with the intent, its attempts, the server span of each, the phases, the provider call and the provider's span", { timeout: TEST_TIMEOUT_MS }, async () => {
  const account = `trace_${Date.now().toString(36)}`;
  // Retry-After: 1 holds each wait a second, long enough for a WebDriver poll (Firefox, WebKit) to see it.
  await server.setFaults({ failBeforeWork: 1, retryAfterSecs: 1 });
  const context = await browser.newContext({ viewport: { width: 1280, height: 1400 } });
  const page = await context.newPage();
  page.errors = collectPageErrors(page);
  await page.goto(`${server.url}/?fast=1&account=${account}&traces=${encodeURIComponent(receiver.url)}`);
  await page.waitForFunction(() => document.querySelector("main")?.dataset.state === "idle");
  assert.equal(await page.locator("#trace-card").isVisible(), true, "the trace card shows with ?traces=");

  await page.click("#pay");
  // Two 503s, then the reload while the client waits before its third attempt.
  await page.waitForFunction(() => document.querySelector("main")?.dataset.state === "waiting" && /^2\b/.test(document.querySelector("#attempt")?.textContent ?? ""), null, { timeout: 30_000 });
  await page.reload();
  await page.waitForFunction(() => ["sending", "waiting"].includes(document.querySelector("main")?.dataset.state), null, { timeout: 30_000 });
  await page.waitForFunction(() => document.querySelector("main")?.dataset.state === "waiting", null, { timeout: 30_000 });
  await server.setFaults({});
  await page.waitForFunction(() => document.querySelector("main")?.dataset.state === "paid", null, { timeout: 30_000 });
  const key = (await page.locator("#intent-key").textContent()).trim();

  // The server exports in batches: wait until every attempt's server span is drawn.
  const deadline = Date.now() + 30_000 * timeoutScale;
  let drawn = [];
  for (;;) {
    drawn = await rows(page);
    const attempts = drawn.filter((r) => r.role === "attempt");
    const requests = drawn.filter((r) => r.role === "request");
    const done = attempts.some((r) => r.status === "201") && requests.length >= attempts.length && drawn.some((r) => r.role === "provider");
    if (done || Date.now() > deadline) break;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  await page.screenshot({ path: path.join(screenshotDir, "trace.png"), fullPage: true });
  const summary = await page.locator("#trace-summary").textContent();

  const traces = new Set(drawn.map((r) => r.traceId));
  assert.equal(traces.size, 1, `one trace: ${JSON.stringify([...traces])}`);
  const byRole = (role) => drawn.filter((r) => r.role === role);
  assert.equal(byRole("intent").length, 1, `one intent span: ${summary}`);
  const [intent] = byRole("intent");
  assert.match(intent.text, new RegExp(`key #${keyHash(key)}`), "the intent shows the key's hash");

  // The attempts, children of the intent: at least two before the reload and one after, the last one 201.
  const attempts = byRole("attempt");
  assert.ok(attempts.length >= 3, `three attempts or more: ${JSON.stringify(attempts.map((a) => a.text))}`);
  assert.ok(attempts.every((a) => a.parentSpanId === intent.spanId), "every attempt is the intent's child");
  assert.deepEqual(attempts.map((a) => a.status), [...attempts.slice(1).map(() => "503"), "201"]);
  assert.deepEqual(
    attempts.map((a) => /resend_count (\d+)/.exec(a.text)?.[1]),
    attempts.map((_, i) => (i === 0 ? undefined : String(i))),
    "resend_count absent on the first attempt, then 1, 2, …",
  );

  // The server's request span of each attempt, that attempt's child, with the status the page saw.
  const requests = byRole("request");
  assert.equal(requests.length, attempts.length, `a server span per attempt: ${summary}`);
  for (const attempt of attempts) {
    const request = requests.find((r) => r.parentSpanId === attempt.spanId);
    assert.ok(request, `the server span of ${attempt.text}`);
    assert.equal(request.status, attempt.status);
  }
  assert.match(requests.find((r) => r.status === "201").text, /fresh/);
  assert.ok(byRole("phase").length >= 3, `the phases of the order: ${summary}`);

  // The provider call, with the hash of the key the server derived (never the client's key).
  const [charge, ...more] = (await provider.get("/charges")).charges;
  assert.equal(more.length, 0, "one charge");
  const calls = byRole("provider-call");
  assert.equal(calls.length, 1, `one provider call: ${summary}`);
  assert.match(calls[0].text, new RegExp(`derived key #${keyHash(charge.idempotencyKey)}`));
  const charged = byRole("provider");
  assert.equal(charged.length, 1, `the provider's span of the charge: ${summary}`);
  assert.equal(charged[0].parentSpanId, calls[0].spanId, "the provider's span is the call's child");
  assert.equal(charged[0].status, "201");
  assert.ok(!drawn.some((r) => r.text.includes(key)), "no row shows the key itself");
  assert.deepEqual(page.errors.map(String), [], "no uncaught errors in the page");
  await context.close();
});

test("crash after the charge: the completer finishes the key in the payment's trace, then the confirmation's delivery and receipt", { timeout: TEST_TIMEOUT_MS * 2 }, async () => {
  const mailbox = await startService("mail-receiver", { label: "trace-mail", args: ["--enable-faults", "--otlp-endpoint", receiver.url] });
  const dbDir = mkdtempSync(path.join(os.tmpdir(), "if-trace-crash-"));
  let crashes = 0;
  let supervised;
  // Back from the crash, the server answers the page 503 (before any work, so the page cannot take the key
  // over) until the completer has finished the key once its lease ran out.
  const held = { failBeforeWork: 1, retryAfterSecs: 1 };
  supervised = await startSupervisedServer({
    www, pkg: pkgDir, label: "trace-crash", dbFile: path.join(dbDir, "trace.sqlite"),
    args: ["--provider-url", provider.url, "--mail-url", mailbox.url, "--otlp-endpoint", receiver.url, "--key-lease-ms", "3000"],
  }, {
    onCrash: () => { crashes += 1; void supervised.setFaults(held); },
    cleanup: () => rmSync(dbDir, { recursive: true, force: true }),
  });
  const chargesBefore = (await provider.get("/charges")).charges.length;
  const context = await browser.newContext({ viewport: { width: 1280, height: 1400 } });
  try {
    const page = await context.newPage();
    page.errors = collectPageErrors(page);
    const account = `trace_crash_${Date.now().toString(36)}`;
    await page.goto(`${supervised.url}/?fast=1&account=${account}&traces=${encodeURIComponent(receiver.url)}`);
    await page.waitForFunction(() => document.querySelector("main")?.dataset.state === "idle");
    await page.click('[data-preset="crash"]');
    await page.waitForFunction(() => document.querySelector('[data-preset="crash"]').getAttribute("aria-pressed") === "true");
    await page.click("#pay");

    // The completer finished the key and the confirmation reached the mail receiver; then the page may
    // come in, and its retry gets the stored answer.
    const deadline = Date.now() + 30_000 * timeoutScale;
    while ((await mailbox.get("/messages")).count < 1) {
      assert.ok(Date.now() < deadline, "the completer finished the key and the confirmation was delivered");
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    assert.equal(crashes, 1, "the server crashed once, after the charge");
    await supervised.setFaults({});
    await page.waitForFunction(() => document.querySelector("main")?.dataset.state === "paid", null, { timeout: 30_000 });

    // The server and the mail receiver export in batches: wait until the completion, the delivery and the
    // receipt are drawn.
    let drawn = [];
    for (;;) {
      drawn = await rows(page);
      const done = ["completion", "delivery", "receipt"].every((role) => drawn.some((r) => r.role === role))
        && drawn.some((r) => r.role === "attempt" && r.status === "201");
      if (done || Date.now() > deadline + 30_000 * timeoutScale) break;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    await page.screenshot({ path: path.join(screenshotDir, "trace-crash.png"), fullPage: true });
    const summary = await page.locator("#trace-summary").textContent();
    const traces = new Set(drawn.map((r) => r.traceId));
    assert.equal(traces.size, 1, `one trace: ${JSON.stringify([...traces])}`);
    const byRole = (role) => drawn.filter((r) => r.role === role);
    assert.equal(byRole("intent").length, 1, `one intent span: ${summary}`);
    const completions = byRole("completion");
    assert.equal(completions.length, 1, `the completer's span in the payment's trace: ${summary}`);
    assert.match(completions[0].text, /at charge_started/, "the completer resumes where the crash left the key");
    const steps = byRole("phase").filter((r) => r.parentSpanId === completions[0].spanId);
    assert.ok(steps.some((r) => /phase finished/.test(r.text)), `the completer's phases are its children: ${JSON.stringify(steps.map((r) => r.text))}`);
    const [delivery] = byRole("delivery");
    assert.ok(delivery, `the confirmation's delivery: ${summary}`);
    assert.ok(steps.some((r) => r.spanId === delivery.parentSpanId), "the delivery is a child of the completer's last phase");
    const [receipt] = byRole("receipt");
    assert.ok(receipt, `the mail receiver's receipt: ${summary}`);
    assert.equal(receipt.parentSpanId, delivery.spanId, "the receipt is the delivery's child");
    assert.equal((await provider.get("/charges")).charges.length, chargesBefore + 1, "one charge for the payment");
    assert.deepEqual(page.errors.map(String), [], "no uncaught errors in the page");
  } finally {
    await context.close();
    await supervised.stop();
    await mailbox.stop();
  }
});
