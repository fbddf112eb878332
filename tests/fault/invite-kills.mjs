// examples/invite (the app built on the server library alone) under external `kill -9`: a keyed load
// that retries each key until a definite answer, while instances of the app are killed with SIGKILL at
// random moments and started again on the same port and store; then, with every instance up, the
// outbox drains to the mail receiver and each key must have exactly one invitation row and one email.
// On SQLite (one instance, its file) and on PostgreSQL (PG_INSTANCES instances on one database of a
// throwaway cluster, requests spread round-robin, so one key's retries land on different instances).
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { killable, restart } from "./killable.mjs";
import { startCluster } from "./pg-cluster.mjs";
import { serviceBinary, startService } from "../support/reference-server.mjs";
import { INVITES, PG_INSTANCES, between, sleep } from "./options.mjs";

// The load: each key is started at INVITE_RATE keys a second by CONCURRENCY senders, so the kills fall
// across the whole load rather than after it.
const INVITE_RATE = 300;
const CONCURRENCY = 16;
const ATTEMPT_TIMEOUT_MS = 5000;
const KEY_DEADLINE_MS = 90_000; // a key without a definite answer by then is counted lost
// A kill every KILL_EVERY_MS (a random moment within), during the load and while the outbox drains.
const KILL_EVERY_MS = [250, 900];
const DRAIN_TIMEOUT_MS = Math.max(90_000, INVITES * 20); // the outbox delivers well over 50 emails a second
/** After the drain: how long the counts must stay the same (late re-deliveries would show up here). */
const SETTLE_MS = 1500;

/** One key until a definite answer: 201 (done), another 4xx (refused, a problem); everything else is retried. */
async function send(key, apps, figures) {
  const deadline = Date.now() + KEY_DEADLINE_MS;
  while (Date.now() < deadline) {
    const app = apps[figures.attempts++ % apps.length];
    try {
      const response = await fetch(`${app.url()}/api/invites`, {
        method: "POST", body: JSON.stringify({ email: key.email }), signal: AbortSignal.timeout(ATTEMPT_TIMEOUT_MS),
        headers: { "content-type": "application/json", "idempotency-key": key.key },
      });
      const body = await response.json().catch(() => null);
      if (response.status === 201) {
        key.id = body?.id;
        if (response.headers.get("idempotent-replayed") === "true") figures.replayed += 1;
        return;
      }
      figures.statuses[response.status] = (figures.statuses[response.status] ?? 0) + 1;
      if (response.status < 500 && ![408, 409, 429].includes(response.status)) {
        key.refused = `${response.status} ${JSON.stringify(body)}`;
        return;
      }
    } catch {
      figures.networkErrors += 1; // the instance was killed under the request, or is starting again
    }
    await sleep(between(20, 120));
  }
}

/** `check()` until it gives a truthy value, or null after `timeoutMs` (a check that throws: not yet). */
async function until(check, timeoutMs) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = await check().catch(() => null);
    if (value) return value;
    if (Date.now() > end) return null;
    await sleep(250);
  }
}

/**
 * One kill run: `pg` for PG_INSTANCES instances on PostgreSQL, else one on SQLite. Resolves to the exit code
 * (0: every key has exactly one invitation and one email) after printing the figures.
 */
export async function runInviteKills({ pg }) {
  const t0 = Date.now();
  const cleanups = [];
  const problems = [];
  const problem = (text) => { problems.push(text); if (problems.length <= 20) console.error(`PROBLEM (invite): ${text}`); };
  const figures = { attempts: 0, replayed: 0, statuses: {}, networkErrors: 0, kills: 0 };
  const store = pg ? `PostgreSQL, ${PG_INSTANCES} instances (round-robin)` : "SQLite, 1 instance";
  console.log(`\n==== examples/invite under kill -9: ${INVITES} keys, ${store}`);
  try {
    const mail = await startService("mail-receiver", { label: "invite-kills-mail" });
    cleanups.push(() => mail.stop());
    let storeArgs;
    if (pg) {
      const cluster = await startCluster();
      cleanups.push(() => cluster.stop());
      cluster.createDatabase("invite");
      storeArgs = ["--database-url", cluster.url("invite")];
    } else {
      const dir = mkdtempSync(path.join(os.tmpdir(), "if-invite-kills-"));
      cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
      storeArgs = ["--db", path.join(dir, "invites.sqlite")];
    }
    const apps = Array.from({ length: pg ? PG_INSTANCES : 1 }, (_, i) => killable(serviceBinary("invite-example"), [...storeArgs, "--mail-url", mail.url], `invite-example ${i + 1}`));
    for (const app of apps) { await app.start(); cleanups.push(() => app.stop()); }

    const run = randomUUID().slice(0, 8);
    const keys = Array.from({ length: INVITES }, (_, i) => ({ key: randomUUID(), email: `k${i}.${run}@example.com`, id: undefined, refused: undefined }));
    const state = { killing: true };
    const killer = (async () => {
      while (state.killing) {
        await sleep(between(...KILL_EVERY_MS));
        if (!state.killing) break;
        const app = apps[between(0, apps.length - 1)];
        await app.kill();
        figures.kills += 1;
        await restart(app);
      }
    })();
    const loadStart = Date.now();
    let next = 0;
    await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
      for (;;) {
        const i = next++;
        if (i >= keys.length) return;
        await sleep(loadStart + (i * 1000) / INVITE_RATE - Date.now());
        await send(keys[i], apps, figures);
      }
    }));
    const loadSeconds = (Date.now() - loadStart) / 1000;
    // Kills go on while the outbox delivers (a kill between a delivery and its mark re-delivers it).
    const drainStart = Date.now();
    const answered = keys.filter((k) => k.id !== undefined).length;
    const emailsOf = () => mail.get("/messages");
    await until(async () => (await emailsOf()).count * 2 >= answered, DRAIN_TIMEOUT_MS / 2);
    state.killing = false;
    await killer;
    const settled = await until(async () => {
      const before = await emailsOf();
      if (before.count < answered) return null;
      await sleep(SETTLE_MS);
      const after = await emailsOf();
      return after.count === before.count && after;
    }, DRAIN_TIMEOUT_MS);
    const drainSeconds = (Date.now() - drainStart) / 1000;
    const messages = settled ?? (await emailsOf());
    if (!settled) problem(`the outbox did not drain in ${DRAIN_TIMEOUT_MS / 1000} s: ${messages.count} emails for ${answered} invitations`);
    const invites = (await until(async () => (await fetch(`${apps[0].url()}/api/invites`)).json(), 10_000))?.invites ?? [];

    const rowsOf = new Map();
    for (const row of invites) rowsOf.set(row.email, [...(rowsOf.get(row.email) ?? []), row]);
    const mailsOf = new Map();
    for (const m of messages.messages) mailsOf.set(m.to, [...(mailsOf.get(m.to) ?? []), m]);
    const count = { lost: 0, duplicateRows: 0, missingEmails: 0, duplicateEmails: 0, orphans: 0 };
    for (const k of keys) {
      const rows = rowsOf.get(k.email) ?? [];
      const mails = mailsOf.get(k.email) ?? [];
      if (k.refused) problem(`${k.email}: refused ${k.refused}`);
      if (k.id === undefined || rows.length === 0) { count.lost += 1; problem(`${k.email}: ${k.id === undefined ? "no definite answer" : "answered but no row"}`); }
      if (rows.length > 1) { count.duplicateRows += rows.length - 1; problem(`${k.email}: ${rows.length} invitation rows`); }
      if (rows.length && k.id !== undefined && rows[0].id !== k.id) problem(`${k.email}: answered invitation ${k.id}, the row is ${rows[0].id}`);
      if (mails.length === 0) { count.missingEmails += 1; problem(`${k.email}: no email`); }
      if (mails.length > 1) { count.duplicateEmails += mails.length - 1; problem(`${k.email}: ${mails.length} emails`); }
      if (mails.length && rows.length && !mails[0].text.includes(`number ${rows[0].id}.`)) problem(`${k.email}: the email names another invitation: ${mails[0].text}`);
    }
    const ours = new Set(keys.map((k) => k.email));
    for (const email of new Set([...rowsOf.keys(), ...mailsOf.keys()])) if (!ours.has(email)) { count.orphans += 1; problem(`${email}: a row or email for no key`); }

    const rows = [
      ["store", store],
      ["keys", `${keys.length} (${INVITE_RATE}/s, ${CONCURRENCY} senders)`],
      ["kill -9 (each restarted on its port)", figures.kills],
      ["attempts", figures.attempts],
      ["  connection errors (killed or restarting)", figures.networkErrors],
      ["  other answers before the 201", JSON.stringify(figures.statuses)],
      ["  201 replayed (the first answer was lost)", figures.replayed],
      ["invitation rows / emails at the receiver", `${invites.length} / ${messages.count}`],
      ["  emails delivered again and refused by the receiver", messages.duplicatesRefused],
      ["lost (no answer or no row) / duplicate rows", `${count.lost} / ${count.duplicateRows}`],
      ["missing / duplicate emails", `${count.missingEmails} / ${count.duplicateEmails}`],
      ["rows or emails for no key", count.orphans],
      ["problems", problems.length],
      ["load / drain after it / runtime", `${loadSeconds.toFixed(1)} s / ${drainSeconds.toFixed(1)} s / ${((Date.now() - t0) / 1000).toFixed(1)} s`],
    ];
    const width = Math.max(...rows.map(([k]) => k.length));
    console.log(`\n==== examples/invite under kill -9 figures`);
    for (const [k, v] of rows) console.log(`${k.padEnd(width)}  ${v}`);
    if (figures.kills === 0) problem("no instance was killed");
  } catch (error) {
    problem(`harness error: ${error?.stack ?? error}`);
  } finally {
    for (const cleanup of cleanups.reverse()) await Promise.resolve().then(cleanup).catch((error) => console.error(`cleanup: ${error?.stack ?? error}`));
  }
  console.log(problems.length ? `FAIL (invite, ${store}): ${problems.length} problems` : `OK (invite, ${store}): one invitation and one email per key, 0 lost, 0 duplicate`);
  return problems.length ? 1 : 0;
}
