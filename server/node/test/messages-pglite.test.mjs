// The outbox and inbox on PGlite (a database folder on disk): the same scenarios and statements as on
// PostgreSQL.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe } from "node:test";

import { PGlite } from "@electric-sql/pglite";
import { installInbox, installOutbox, pgliteStore } from "idempotent-endpoint";

import { MAILS, messageScenarios } from "./support/messages.mjs";

let dir;
let db;
let store;

before(async () => {
  dir = mkdtempSync(path.join(tmpdir(), "idempotent-endpoint-messages-"));
  db = new PGlite(path.join(dir, "data"));
  store = pgliteStore(db);
  await installOutbox(db);
  await installInbox(db);
  await db.exec(MAILS);
});

after(async () => {
  await db?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("outbox and inbox on PGlite", () => {
  messageScenarios(() => ({ store, db }));
});
