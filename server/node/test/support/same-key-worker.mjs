// One of the processes of the concurrency test: its own pool on the shared database, `n` requests with one
// key at once, each handler holding its transaction open a while; prints every outcome as JSON.
import pg from "pg";
import { idempotentEndpoint } from "idempotent-endpoint";

import { keyed, orderHandler } from "./scenarios.mjs";

const [url, key, n] = process.argv.slice(2);
const pool = new pg.Pool({ connectionString: url, max: Number(n) });
const endpoint = idempotentEndpoint({ database: pool });
const slow = new Promise((r) => setTimeout(r, 300));
const results = await Promise.all(
  Array.from({ length: Number(n) }, async () => {
    const { outcome, answer } = await endpoint.run(keyed(key), orderHandler(key, slow));
    return { outcome, status: answer.status, body: answer.body };
  }),
);
await pool.end();
process.stdout.write(JSON.stringify(results));
