// The library's inbox under external `kill -9`: a sender delivers each of MESSAGES messages 3 times to the
// reference mail receiver (`mail-receiver`, on the library's SQLite inbox), each delivery retried until a
// definite answer, while the receiver is killed with SIGKILL at random moments and started again on the
// same port and file. Then every message must be stored exactly once, and every delivery after the first
// definite answer refused as a duplicate, at the sender (200 `duplicate: true`) and in the receiver's own
// count (GET /messages, `duplicatesRefused`). SQLite only: the mail receiver has no PostgreSQL store.
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { killable, restart } from "./killable.mjs";
import { serviceBinary } from "../support/reference-server.mjs";
import { MESSAGES, between, sleep } from "./options.mjs";

const DELIVERIES = 3; // per message
const CONCURRENCY = 16;
/** Delivery k + 1 of a message waits until this many later messages were first delivered, so the three
 * deliveries of one message are spread over the run, across kills. */
const SPREAD = Math.max(1, Math.floor(MESSAGES / 10));
const ATTEMPT_TIMEOUT_MS = 5000;
const DELIVERY_DEADLINE_MS = 60_000; // a delivery without a definite answer by then is a problem
const KILL_EVERY_MS = [250, 900]; // a kill every so often (a random moment within)

/** One delivery until a definite answer (201 stored, or 200 refused as a duplicate); counts what it saw. */
async function deliver(message, receiver, figures) {
  const deadline = Date.now() + DELIVERY_DEADLINE_MS;
  let lost = 0; // attempts without an answer: the receiver may have committed them before it died
  while (Date.now() < deadline) {
    figures.attempts += 1;
    try {
      const response = await fetch(`${receiver.url()}/messages`, {
        method: "POST", body: JSON.stringify(message.body), signal: AbortSignal.timeout(ATTEMPT_TIMEOUT_MS),
        headers: { "content-type": "application/json" },
      });
      const body = await response.json().catch(() => null);
      if (response.status === 201 || response.status === 200) {
        return { status: response.status, duplicate: body?.duplicate, lost };
      }
      figures.statuses[response.status] = (figures.statuses[response.status] ?? 0) + 1;
      if (response.status < 500) return { status: response.status, duplicate: undefined, lost, refusedBody: JSON.stringify(body) };
    } catch {
      lost += 1;
      figures.networkErrors += 1; // the receiver was killed under the request, or is starting again
    }
    await sleep(between(10, 60));
  }
  return { status: "none", duplicate: undefined, lost };
}

/** The kill run on SQLite; resolves to the exit code (0: every message stored once, every re-delivery refused). */
export async function runInboxKills() {
  const t0 = Date.now();
  const cleanups = [];
  const problems = [];
  const problem = (text) => { problems.push(text); if (problems.length <= 20) console.error(`PROBLEM (inbox): ${text}`); };
  const figures = { attempts: 0, statuses: {}, networkErrors: 0, kills: 0 };
  console.log(`\n==== the inbox under kill -9: ${MESSAGES} messages x ${DELIVERIES} deliveries to mail-receiver (SQLite)`);
  try {
    const dir = mkdtempSync(path.join(os.tmpdir(), "if-inbox-kills-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const receiver = killable(serviceBinary("mail-receiver"), ["--db", path.join(dir, "mail.sqlite")], "mail-receiver");
    await receiver.start();
    cleanups.push(() => receiver.stop());

    const run = randomUUID().slice(0, 8);
    const messages = Array.from({ length: MESSAGES }, (_, i) => {
      const ended = Array.from({ length: DELIVERIES }, () => {
        const end = {};
        end.promise = new Promise((resolve) => { end.resolve = resolve; });
        return end;
      });
      return {
        body: { id: `m${i}-${run}`, to: `r${i}.${run}@example.com`, subject: `message ${i}`, text: `the text of message ${i}` },
        answers: [],
        ended, // ended[d].promise resolves once delivery d has its definite answer (or gave up)
      };
    });
    // Delivery d of message i is task (i + d * SPREAD) in the queue, after delivery d - 1 of it ended.
    const tasks = [];
    for (let slot = 0; slot < MESSAGES + (DELIVERIES - 1) * SPREAD; slot++) {
      for (let d = 0; d < DELIVERIES; d++) {
        const i = slot - d * SPREAD;
        if (i >= 0 && i < MESSAGES) tasks.push([i, d]);
      }
    }
    const state = { killing: true };
    const killer = (async () => {
      while (state.killing) {
        await sleep(between(...KILL_EVERY_MS));
        if (!state.killing) break;
        await receiver.kill();
        figures.kills += 1;
        await restart(receiver);
      }
    })();
    const loadStart = Date.now();
    let next = 0;
    await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
      while (next < tasks.length) {
        const [i, d] = tasks[next++];
        const message = messages[i];
        if (d > 0) await message.ended[d - 1].promise;
        message.answers[d] = await deliver(message, receiver, figures);
        message.ended[d].resolve();
      }
    }));
    const loadSeconds = (Date.now() - loadStart) / 1000;
    state.killing = false;
    await killer;
    const stored = await (await fetch(`${receiver.url()}/messages`)).json();

    const rowsOf = new Map();
    for (const m of stored.messages) rowsOf.set(m.id, [...(rowsOf.get(m.id) ?? []), m]);
    const count = { fresh: 0, refusedAnswers: 0, firstAnswerRefused: 0, lostAttempts: 0 };
    for (const message of messages) {
      const { id } = message.body;
      const rows = rowsOf.get(id) ?? [];
      const answers = message.answers;
      const lost = answers.reduce((sum, a) => sum + a.lost, 0);
      count.lostAttempts += lost;
      if (rows.length !== 1) problem(`${id}: stored ${rows.length} times`);
      for (const [d, a] of answers.entries()) {
        if (a.status === 201) count.fresh += 1;
        else if (a.status === 200 && a.duplicate === true) count.refusedAnswers += 1;
        else problem(`${id}: delivery ${d + 1} got ${a.status}${a.refusedBody ? ` ${a.refusedBody}` : ""}${a.status === 200 ? " without duplicate: true" : ""}`);
      }
      // Only the first delivery can store the message; it is refused only if an attempt of it whose
      // answer was lost (the receiver killed after its commit) stored it.
      if (answers.slice(1).some((a) => a.status !== 200)) problem(`${id}: a re-delivery was not refused: ${JSON.stringify(answers)}`);
      if (answers[0].status === 200) {
        count.firstAnswerRefused += 1;
        if (answers[0].lost === 0) problem(`${id}: its first delivery was refused, and no attempt before it was lost`);
      }
      // The receiver's count: every refusal the sender saw, at most the lost attempts more.
      const refusedSeen = answers.filter((a) => a.status === 200).length;
      const refused = rows[0]?.duplicatesRefused ?? 0;
      if (rows.length && (refused < refusedSeen || refused > refusedSeen + lost)) {
        problem(`${id}: the receiver counts ${refused} refused, the sender saw ${refusedSeen} (and lost ${lost} answers)`);
      }
    }
    const ours = new Set(messages.map((m) => m.body.id));
    for (const id of rowsOf.keys()) if (!ours.has(id)) problem(`${id}: stored, but never sent`);
    if (figures.kills === 0) problem("the receiver was never killed");

    const rows = [
      ["messages / deliveries (each until a definite answer)", `${MESSAGES} / ${MESSAGES * DELIVERIES} (${CONCURRENCY} senders)`],
      ["kill -9 of the receiver (each restarted on its port and file)", figures.kills],
      ["attempts", figures.attempts],
      ["  connection errors (killed or restarting)", figures.networkErrors],
      ["  other answers before a definite one", JSON.stringify(figures.statuses)],
      ["201 stored / 200 refused as duplicates", `${count.fresh} / ${count.refusedAnswers}`],
      ["  first deliveries refused (their stored attempt's answer lost)", count.firstAnswerRefused],
      ["stored messages / the receiver's duplicates refused", `${stored.count} / ${stored.duplicatesRefused}`],
      ["problems", problems.length],
      ["deliveries / runtime", `${loadSeconds.toFixed(1)} s / ${((Date.now() - t0) / 1000).toFixed(1)} s`],
    ];
    const width = Math.max(...rows.map(([k]) => k.length));
    console.log(`\n==== the inbox under kill -9 figures`);
    for (const [k, v] of rows) console.log(`${k.padEnd(width)}  ${v}`);
  } catch (error) {
    problem(`harness error: ${error?.stack ?? error}`);
  } finally {
    for (const cleanup of cleanups.reverse()) await Promise.resolve().then(cleanup).catch((error) => console.error(`cleanup: ${error?.stack ?? error}`));
  }
  console.log(problems.length ? `FAIL (inbox): ${problems.length} problems` : "OK (inbox): every message stored once, every re-delivery refused");
  return problems.length ? 1 : 0;
}
