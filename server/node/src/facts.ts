// Generated from server/node/core/src/facts.rs by
// `IF_BLESS=1 cargo test -p idempotent-endpoint-node-core --test facts`: do not edit.
// The Rust library's statements, numbers and names, as the Node half reads them.

/** The PostgreSQL statements (the Rust library's, the very same text; each member names its constant) and the protocol's numbers. */
export interface Constants {
  /** The key rows' statements (the Rust library's module `postgres_sql`, the very same text), `$1`... parameters. */
  readonly sql: {
    /** The key table and its indexes (`SCHEMA`). */
    readonly schema: string;
    /** Takes the key's in-flight mark without waiting and, holding it, inserts the key row or replaces an expired one; one row `{ held, claimed }` (`CLAIM_KEY`). */
    readonly claimKey: string;
    /** Whether any session holds the key's in-flight mark (`LOCK_HELD`). */
    readonly lockHeld: string;
    /** The key row's fingerprint and answer (`SELECT_ROW`). */
    readonly selectRow: string;
    /** The key row within the retention (`SELECT_LIVE_ROW`). */
    readonly selectLiveRow: string;
    /** Stores the work's answer on the key row (`STORE_ANSWER`). */
    readonly storeAnswer: string;
    /** The lock timeout for the rest of the transaction (`SET_LOCK_TIMEOUT`). */
    readonly setLockTimeout: string;
    /** Deletes key rows past the retention (`SWEEP`). */
    readonly sweep: string;
  };
  /** The outbox's statements (the Rust library's module `outbox_sql`, the very same text). */
  readonly outbox: {
    /** The outbox table (`SCHEMA`). */
    readonly schema: string;
    /** Writes a message in the caller's transaction (`ENQUEUE`). */
    readonly enqueue: string;
    /** Claims due messages with `FOR UPDATE SKIP LOCKED` (`CLAIM`). */
    readonly claim: string;
    /** Schedules one message's next attempt (`RETRY`). */
    readonly retry: string;
    /** A pass's marks in one statement (`MARK`). */
    readonly mark: string;
    /** Undelivered messages and the oldest's enqueue time (`BACKLOG`). */
    readonly backlog: string;
  };
  /** The inbox's statements (the Rust library's module `inbox_sql`, the very same text). */
  readonly inbox: {
    /** The inbox table (`SCHEMA`). */
    readonly schema: string;
    /** Deletes the record if it expired (`FORGET_EXPIRED`). */
    readonly forgetExpired: string;
    /** Inserts the record unless one exists (`INSERT`). */
    readonly insert: string;
    /** The record's answer columns (`SELECT_ANSWER`). */
    readonly selectAnswer: string;
    /** Stores the work's answer on the record (`STORE_ANSWER`). */
    readonly storeAnswer: string;
    /** Deletes records past the retention (`SWEEP`). */
    readonly sweep: string;
    /** The savepoint the record and the work run in (`SAVEPOINT`). */
    readonly savepoint: string;
  };
  /** The atomic phases' statements (the Rust library's module `phases_sql`, the very same text) and the points at either end. */
  readonly phases: {
    /** The recovery point of a new row (`phases::STARTED`). */
    readonly started: string;
    /** The recovery point of a row with its answer (`phases::FINISHED`). */
    readonly finished: string;
    /** Deletes the key's row if it expired (`postgres_sql::FORGET_EXPIRED`). */
    readonly forgetExpired: string;
    /** Inserts a new row at the first point, held (`INSERT_STARTED`). */
    readonly insertStarted: string;
    /** The existing row, locked for the decision (`SELECT_FOR_BEGIN`). */
    readonly selectForBegin: string;
    /** Takes a row over with a new lease (`TAKE_OVER`). */
    readonly takeOver: string;
    /** The lease token of an unfinished row, locked (`CHECK_LEASE`). */
    readonly checkLease: string;
    /** Moves the row to a point, renewing the lease (`ADVANCE`). */
    readonly advance: string;
    /** Stores the answer and ends the lease (`FINISH`). */
    readonly finish: string;
    /** Ends a lease at once (`RELEASE`). */
    readonly release: string;
    /** Deletes a held row still at the first point (`ABANDON`). */
    readonly abandon: string;
    /** The completer's query (`UNFINISHED`). */
    readonly unfinished: string;
    /** Bounds the transaction's waits for a key row, keeping the session's own `lock_timeout` (`postgres_sql::SET_KEY_LOCK_TIMEOUT`). */
    readonly setKeyLockTimeout: string;
  };
  /** How many random bytes the outbox's retry delay draws from at most. */
  readonly retryRandomBytes: number;
  /** The `lock_timeout` a settle waits for a key row held by another transaction (`postgres_sql::settle_lock_timeout`). */
  readonly settleLockTimeout: string;
  /** The SQLSTATE of a statement that gave up waiting for a lock (`postgres_sql::LOCK_NOT_AVAILABLE`). */
  readonly lockNotAvailable: string;
  /** The SQLSTATE of a statement the session's `statement_timeout` ended (`postgres_sql::QUERY_CANCELED`). */
  readonly queryCanceled: string;
  /** How long a phase's statement waits for a key row another transaction holds (`postgres_sql::key_lock_timeout`). */
  readonly keyLockTimeout: string;
  /** The fingerprint stored on a fence row (`FENCED_FINGERPRINT`). */
  readonly fencedFingerprint: string;
  /** The default retention of a key row, in seconds (`DEFAULT_RETENTION`). */
  readonly defaultRetentionSecs: number;
  /** The largest answer body a key row stores, in bytes (`MAX_STORED_BODY_BYTES`). */
  readonly maxStoredBodyBytes: number;
  /** How long a request's whole body may take to arrive by default, in milliseconds (`defaults::BODY_DEADLINE`). */
  readonly bodyTimeoutMs: number;
  /** The outbox worker's defaults (the Rust library's module `defaults`, as its `outbox::Worker` has them). */
  readonly outboxWorker: {
    /** The claim on a message, in ms (`OUTBOX_LEASE`). */
    readonly leaseMs: number;
    /** How often an idle worker looks, in ms (`OUTBOX_POLL`). */
    readonly pollMs: number;
    /** The first retry's backoff step, in ms (`OUTBOX_BASE_DELAY`). */
    readonly baseDelayMs: number;
    /** The longest retry wait, in ms (`OUTBOX_MAX_DELAY`). */
    readonly maxDelayMs: number;
    /** Messages per pass (`OUTBOX_BATCH`). */
    readonly batch: number;
    /** Deliveries at once, at most (`OUTBOX_CONCURRENCY`). */
    readonly concurrency: number;
  };
  /** The longest key, in characters (`key::MAX_KEY_CHARS`). */
  readonly maxKeyChars: number;
}

/** The statements and numbers. */
export const constants: Constants = {
  sql: {
    schema: "\nCREATE TABLE IF NOT EXISTS idempotency_records (\n    scope            TEXT    NOT NULL,\n    key              TEXT    NOT NULL,\n    fingerprint      TEXT    NOT NULL,\n    status_code      INTEGER NULL,\n    response_headers TEXT    NULL,\n    response_body    TEXT    NULL,\n    created_at       BIGINT  NOT NULL,\n    recovery_point   TEXT    NOT NULL DEFAULT 'finished',\n    row_id           TEXT    NULL,\n    lock_token       TEXT    NULL,\n    locked_until     BIGINT  NOT NULL DEFAULT 0,\n    PRIMARY KEY (scope, key)\n);\nALTER TABLE idempotency_records ADD COLUMN IF NOT EXISTS traceparent TEXT NULL;\nCREATE INDEX IF NOT EXISTS idempotency_records_unfinished ON idempotency_records (locked_until)\n    WHERE recovery_point <> 'finished';\nCREATE INDEX IF NOT EXISTS idempotency_records_created_at ON idempotency_records (created_at);\n",
    claimKey: "WITH mark AS MATERIALIZED (SELECT pg_try_advisory_xact_lock(hashtextextended($1, 0)) AS held),\nclaim AS (\n  INSERT INTO idempotency_records (scope, key, fingerprint, created_at)\n  SELECT $2::text, $3::text, $4::text, $5::bigint FROM mark WHERE held\n  ON CONFLICT (scope, key) DO UPDATE SET fingerprint = EXCLUDED.fingerprint, created_at = EXCLUDED.created_at,\n    status_code = NULL, response_headers = NULL, response_body = NULL, recovery_point = DEFAULT,\n    row_id = NULL, lock_token = NULL, locked_until = DEFAULT, traceparent = NULL\n  WHERE idempotency_records.created_at < $6::bigint\n  RETURNING 1\n)\nSELECT held, EXISTS (SELECT 1 FROM claim) AS claimed FROM mark",
    lockHeld: "SELECT EXISTS (SELECT 1 FROM pg_locks\n   WHERE locktype = 'advisory' AND objsubid = 1 AND granted\n     AND database = (SELECT oid FROM pg_database WHERE datname = current_database())\n     AND ((classid::bigint << 32) | objid::bigint) = hashtextextended($1, 0))",
    selectRow: "SELECT fingerprint, status_code, response_headers, response_body FROM idempotency_records\n WHERE scope = $1 AND key = $2",
    selectLiveRow: "SELECT fingerprint, status_code, response_headers, response_body FROM idempotency_records\n WHERE scope = $1 AND key = $2 AND created_at >= $3",
    storeAnswer: "UPDATE idempotency_records SET status_code = $1, response_headers = $2, response_body = $3\n WHERE scope = $4 AND key = $5",
    setLockTimeout: "SELECT set_config('lock_timeout', $1, true)",
    sweep: "DELETE FROM idempotency_records WHERE created_at < $1",
  },
  outbox: {
    schema: "\nCREATE TABLE IF NOT EXISTS outbox_messages (\n    id              TEXT    PRIMARY KEY,\n    topic           TEXT    NOT NULL,\n    payload         TEXT    NOT NULL,\n    created_at      BIGINT  NOT NULL,\n    attempts        BIGINT  NOT NULL DEFAULT 0,\n    next_attempt_at BIGINT  NOT NULL DEFAULT 0,\n    claimed_until   BIGINT  NOT NULL DEFAULT 0,\n    delivered_at    BIGINT  NULL\n);\nALTER TABLE outbox_messages ADD COLUMN IF NOT EXISTS ordering_key TEXT NULL;\nALTER TABLE outbox_messages ADD COLUMN IF NOT EXISTS seq BIGSERIAL;\nALTER TABLE outbox_messages ADD COLUMN IF NOT EXISTS traceparent TEXT NULL;\nCREATE INDEX IF NOT EXISTS outbox_messages_pending ON outbox_messages (next_attempt_at) WHERE delivered_at IS NULL;\nCREATE INDEX IF NOT EXISTS outbox_messages_ordered ON outbox_messages (ordering_key, seq)\n    WHERE delivered_at IS NULL AND ordering_key IS NOT NULL;\n",
    enqueue: "INSERT INTO outbox_messages (id, topic, payload, created_at, ordering_key, traceparent)\n                 VALUES ($1, $2, $3, $4, $5, $6)",
    claim: "UPDATE outbox_messages SET claimed_until = $1, attempts = attempts + 1\n                 WHERE id IN (SELECT m.id FROM outbox_messages m\n                              WHERE m.delivered_at IS NULL AND m.next_attempt_at <= $2 AND m.claimed_until <= $2\n                                AND (m.ordering_key IS NULL OR NOT EXISTS (\n                                      SELECT 1 FROM outbox_messages e\n                                      WHERE e.ordering_key = m.ordering_key AND e.delivered_at IS NULL\n                                        AND e.seq < m.seq))\n                              ORDER BY m.next_attempt_at, m.seq LIMIT $3 FOR UPDATE OF m SKIP LOCKED)\n                 RETURNING id, topic, payload, attempts, traceparent",
    retry: "UPDATE outbox_messages SET claimed_until = 0, next_attempt_at = $1 WHERE id = $2",
    mark: "WITH delivered AS (\n                 UPDATE outbox_messages SET delivered_at = $1\n                 WHERE id = ANY($2::text[]) AND delivered_at IS NULL RETURNING 1),\n             retried AS (\n                 UPDATE outbox_messages o SET claimed_until = 0, next_attempt_at = r.at\n                 FROM unnest($3::text[], $4::bigint[]) AS r(id, at)\n                 WHERE o.id = r.id AND o.claimed_until = $5 AND o.delivered_at IS NULL RETURNING 1)\n             SELECT (SELECT count(*) FROM delivered) + (SELECT count(*) FROM retried)",
    backlog: "SELECT count(*), min(created_at) FROM outbox_messages WHERE delivered_at IS NULL",
  },
  inbox: {
    schema: "\nCREATE TABLE IF NOT EXISTS inbox_messages (\n    source           TEXT    NOT NULL,\n    message_id       TEXT    NOT NULL,\n    status_code      INTEGER NULL,\n    response_headers TEXT    NULL,\n    response_body    TEXT    NULL,\n    received_at      BIGINT  NOT NULL,\n    PRIMARY KEY (source, message_id)\n);\nCREATE INDEX IF NOT EXISTS inbox_messages_received_at ON inbox_messages (received_at);\n",
    forgetExpired: "DELETE FROM inbox_messages WHERE source = $1 AND message_id = $2 AND received_at < $3",
    insert: "INSERT INTO inbox_messages (source, message_id, received_at) VALUES ($1, $2, $3)\n             ON CONFLICT (source, message_id) DO NOTHING",
    selectAnswer: "SELECT status_code, response_headers, response_body FROM inbox_messages\n                 WHERE source = $1 AND message_id = $2",
    storeAnswer: "UPDATE inbox_messages SET status_code = $1, response_headers = $2, response_body = $3\n         WHERE source = $4 AND message_id = $5",
    sweep: "DELETE FROM inbox_messages WHERE received_at < $1",
    savepoint: "idempotent_inbox",
  },
  phases: {
    started: "started",
    finished: "finished",
    forgetExpired: "DELETE FROM idempotency_records WHERE scope = $1 AND key = $2 AND created_at < $3",
    insertStarted: "INSERT INTO idempotency_records\n                 (scope, key, fingerprint, created_at, recovery_point, row_id, lock_token, locked_until, traceparent)\n             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (scope, key) DO NOTHING",
    selectForBegin: "SELECT fingerprint, status_code, response_headers, response_body, recovery_point, row_id, locked_until, traceparent\n             FROM idempotency_records WHERE scope = $1 AND key = $2 FOR UPDATE",
    takeOver: "UPDATE idempotency_records SET lock_token = $1, locked_until = $2 WHERE scope = $3 AND key = $4",
    checkLease: "SELECT lock_token FROM idempotency_records WHERE scope = $1 AND key = $2 AND recovery_point <> $3\n             FOR UPDATE",
    advance: "UPDATE idempotency_records SET recovery_point = $1, locked_until = $2 WHERE scope = $3 AND key = $4",
    finish: "UPDATE idempotency_records SET status_code = $1, response_headers = $2, response_body = $3,\n             recovery_point = $4, lock_token = NULL, locked_until = 0\n         WHERE scope = $5 AND key = $6",
    release: "UPDATE idempotency_records SET locked_until = 0 WHERE scope = $1 AND key = $2 AND lock_token = $3",
    abandon: "DELETE FROM idempotency_records\n             WHERE scope = $1 AND key = $2 AND lock_token = $3 AND recovery_point = $4",
    unfinished: "SELECT scope, key, recovery_point, row_id, traceparent FROM idempotency_records\n             WHERE recovery_point <> $1 AND locked_until <= $2 ORDER BY locked_until LIMIT $3\n             FOR UPDATE SKIP LOCKED",
    setKeyLockTimeout: "SELECT set_config('lock_timeout',\n  CASE current_setting('lock_timeout') WHEN '0' THEN $1 ELSE current_setting('lock_timeout') END, true)",
  },
  retryRandomBytes: 256,
  settleLockTimeout: "5000ms",
  lockNotAvailable: "55P03",
  queryCanceled: "57014",
  keyLockTimeout: "2000ms",
  fencedFingerprint: "fenced",
  defaultRetentionSecs: 86400,
  maxStoredBodyBytes: 16384,
  bodyTimeoutMs: 10000,
  outboxWorker: {
    leaseMs: 30000,
    pollMs: 200,
    baseDelayMs: 200,
    maxDelayMs: 10000,
    batch: 64,
    concurrency: 32,
  },
  maxKeyChars: 255,
};

/** The request header that carries the key, lowercase (`IDEMPOTENCY_KEY_HEADER`); the outbox sends a message's id in it too. */
export const IDEMPOTENCY_KEY_HEADER = "idempotency-key";

/** The header marking a replayed answer, lowercase (`REPLAYED_HEADER`). */
export const REPLAYED_HEADER = "idempotent-replayed";

/** The decision for a request whose key row exists (`decide`): replay the stored answer, 422 for another request, 409 while in flight, 410 for a fence. */
export type Decision = "replay" | "mismatch" | "in_flight" | "fenced";

/** Input refused before any key row is written (`problemAnswer`). */
export type RefusalKind = "body-too-large" | "unreadable-body" | "body-timeout" | "invalid-body" | "internal";
