// The mail receiver: takes each email message once, whatever the sender's outbox re-delivers. The message
// id comes as the Idempotency-Key header; the inbox records it in the same transaction as the mail row,
// and a re-delivery gets the first delivery's answer without a second mail. PUT /faults {"fail": 0.5}
// answers that share of deliveries 503 before any work (the receiver "down"); {"delayMs": 100} holds each
// answer that long after the commit (a slow network: a sender that dies meanwhile sends the message again).
//
//   DATABASE_URL=postgres://... (or PGLITE_DIR=./mail-data) PORT=8788 node receiver.mjs
import express from "express";
import { PGlite } from "@electric-sql/pglite";
import pg from "pg";
import { MESSAGE_ID_HEADER, installInbox, receiveMessage, sendAnswer } from "idempotent-endpoint";

// PostgreSQL (DATABASE_URL), or PGlite in a folder (PGLITE_DIR): one process then owns the database.
const db = process.env.PGLITE_DIR ? new PGlite(process.env.PGLITE_DIR) : new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 10 });
await installInbox(db);
await db.query("CREATE TABLE IF NOT EXISTS mails (id BIGSERIAL PRIMARY KEY, message_id TEXT NOT NULL, recipient TEXT NOT NULL, text TEXT NOT NULL)");
let faults = { fail: 0, delayMs: 0 };
/** Re-deliveries answered without a second mail. */
let duplicates = 0;

const app = express();
app.post("/messages", express.json(), async (req, res, next) => {
  if (Math.random() < faults.fail) return void res.status(503).json({ code: "unavailable" });
  const id = req.get(MESSAGE_ID_HEADER) ?? "";
  try {
    const work = async (tx) => {
      const { rows } = await tx.query("INSERT INTO mails (message_id, recipient, text) VALUES ($1, $2, $3) RETURNING id", [id, req.body.to, req.body.text]);
      return { status: 202, body: { mail: Number(rows[0].id) } };
    };
    // The sender's trace, which the receipt's span continues.
    const traceparent = req.get("traceparent");
    const { answer, duplicate } = await receiveMessage(db, "invite-app", id, work, traceparent === undefined ? {} : { traceparent });
    if (duplicate) duplicates += 1;
    if (faults.delayMs > 0) await new Promise((resolve) => setTimeout(resolve, faults.delayMs));
    sendAnswer(res, answer);
  } catch (error) {
    next(error);
  }
});
app.get("/messages", async (_req, res) => {
  const { rows } = await db.query("SELECT message_id, recipient, text FROM mails ORDER BY id");
  res.json({ messages: rows.map((r) => ({ id: r.message_id, to: r.recipient, text: r.text })), duplicates });
});
app.put("/faults", express.json(), (req, res) => {
  faults = { fail: Number(req.body?.fail ?? 0), delayMs: Number(req.body?.delayMs ?? 0) };
  res.json(faults);
});

const server = app.listen(Number(process.env.PORT ?? 8788), "127.0.0.1", () => {
  console.log(`mail receiver on http://127.0.0.1:${server.address().port}`);
});
process.on("SIGTERM", () => server.close(() => void ("end" in db ? db.end() : db.close())));
