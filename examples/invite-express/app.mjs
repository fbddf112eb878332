// The invite app on idempotent-endpoint, Express 5 over node-postgres: POST /api/invites writes an invite
// row and an email message in the key row's transaction (the outbox), and a worker delivers the email to
// the mail receiver (receiver.mjs) with the message id as its Idempotency-Key. Several processes may run it
// on one database.
//
//   DATABASE_URL=postgres://... (or PGLITE_DIR=./data) MAIL_URL=http://127.0.0.1:8788/messages PORT=8787 node app.mjs
import express from "express";
import { PGlite } from "@electric-sql/pglite";
import pg from "pg";
import {
  MESSAGE_ID_HEADER, backlog, deliveryTraceparent, enqueue, idempotent, idempotentEndpoint, installOutbox, keyStatusRoutes, newMessage, outboxWorker,
} from "idempotent-endpoint";

// PostgreSQL (DATABASE_URL), or PGlite in a folder (PGLITE_DIR): one process then owns the database.
const db = process.env.PGLITE_DIR ? new PGlite(process.env.PGLITE_DIR) : new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 10 });
const endpoint = idempotentEndpoint({ database: db });
await endpoint.install();
await installOutbox(db);
await db.query("CREATE TABLE IF NOT EXISTS invites (id BIGSERIAL PRIMARY KEY, email TEXT NOT NULL)");

const app = express();
app.post("/api/invites", idempotent(endpoint, async ({ json, tx }) => {
  const email = typeof json?.email === "string" ? json.email : "";
  if (email.length > 254 || !email.includes("@")) {
    return { status: 400, body: { code: "invalid-email", detail: "`email` must be an email address." } };
  }
  const { rows } = await tx.query("INSERT INTO invites (email) VALUES ($1) RETURNING id", [email]);
  const id = Number(rows[0].id);
  const text = `You are invited. Your invitation is number ${id}.`;
  await enqueue(tx, newMessage("invite-email", { to: email, subject: "Invitation", text }));
  return { status: 201, body: { id, email } };
}));
keyStatusRoutes(app, endpoint, { path: "/api/idempotency-keys/:key" });
app.get("/api/invites", async (_req, res) => {
  const { rows } = await db.query("SELECT id, email FROM invites ORDER BY id");
  res.json({ invites: rows.map((r) => ({ id: Number(r.id), email: r.email })) });
});
app.get("/api/outbox", async (_req, res) => res.json(await backlog(db)));

const worker = outboxWorker(db, async (message) => {
  // The invite request's trace, carried on to the receiver (when @opentelemetry/api traces this app).
  const traceparent = deliveryTraceparent(message);
  const r = await fetch(process.env.MAIL_URL, {
    method: "POST",
    headers: { "content-type": "application/json", [MESSAGE_ID_HEADER]: message.id, ...(traceparent === undefined ? {} : { traceparent }) },
    body: message.payload,
    signal: AbortSignal.timeout(2000),
  });
  if (!r.ok) throw new Error(`the mail receiver answered ${r.status}`);
  // A 6 s lease: a delivery must end within 2 s, and a claim a crashed process left is taken again in 6 s.
}, { leaseMs: 6000, baseDelayMs: 50, maxDelayMs: 1000, pollMs: 50 });
const stop = new AbortController();
const working = worker.run(stop.signal);

const server = app.listen(Number(process.env.PORT ?? 8787), "127.0.0.1", () => {
  console.log(`invite app on http://127.0.0.1:${server.address().port}`);
});
process.on("SIGTERM", () => {
  stop.abort();
  server.close();
  void working.then(() => ("end" in db ? db.end() : db.close()));
});
