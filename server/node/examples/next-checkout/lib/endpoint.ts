// The checkout's endpoint over node-postgres (DATABASE_URL), made on the first request that needs it and
// then shared: `next build` loads the route modules too, and must open no database.
import pg from "pg";
import { idempotentEndpoint } from "idempotent-endpoint";

type Endpoint = ReturnType<typeof idempotentEndpoint<pg.PoolClient>>;
let made: Promise<Endpoint> | undefined;

async function make(): Promise<Endpoint> {
  const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });
  const endpoint = idempotentEndpoint({ database: pool });
  await endpoint.install();
  await pool.query("CREATE TABLE IF NOT EXISTS orders (id SERIAL PRIMARY KEY, sku TEXT NOT NULL)");
  return endpoint;
}

export function checkoutEndpoint(): Promise<Endpoint> {
  made ??= make();
  return made;
}
