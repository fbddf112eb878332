// The cost of protection, per framework and database: requests/s and p50/p99 latency of a protected
// endpoint (idempotent-endpoint: the key row in the order's transaction) against the same endpoint
// unprotected (the same order insert in a transaction of its own, no key), in one run, alternating
// protected and unprotected rounds so drift hits both. Each server runs in a child process (this file with
// --serve); the load comes from this process: CONCURRENCY keep-alive connections, each request a fresh key.
//
//   node server/node/bench/frameworks.mjs [--seconds S] [--rounds R] [--concurrency C]
//   node server/node/bench/frameworks.mjs --tracing [--seconds S] [--rounds R] [--concurrency C]
//   --frameworks express,hono (default: all) and --databases postgres (default: postgres,pglite) run a subset.
//   --durable runs PostgreSQL with its default durability (fsync on); without it, fsync is off as in the tests,
//   so each figure is CPU and round trips alone.
//
// --tracing measures only what tracing costs a request: the express server on PostgreSQL twice, one child
// with the OpenTelemetry SDK registered as an app would (a W3C propagator, the async-hooks context manager,
// a tracer provider whose batch processor hands the spans to an exporter that drops them, and a meter
// provider with a reader, so the counters and gauges are kept), one with @opentelemetry/api alone (no
// provider: the API is a no-op), both sent a `traceparent` with every request, in alternating rounds.
//
// Needs the built package (node server/node/build.mjs) and PostgreSQL binaries (IF_PG_BINDIR or PATH).
// "next" is idempotent-endpoint/next's route handler served as Next calls it (a web Request in, a Response
// out) on @hono/node-server, not a `next start` server. "hono" and "next" answer as the README shows, with a
// plain answer (`c.get("idempotency").answer(...)`, `{ status, body }`); "hono-response" and "next-response"
// are the same servers answering with a Response (`c.json`, `Response.json`), which the integration reads
// back before storing it. The unprotected routes answer with a Response. The "no HTTP" row is
// `endpoint.run` against the same order in a transaction of its own, called in this process on PostgreSQL:
// the key row's own cost.
// Each framework also serves /statements: the unprotected route with the key row's two statements added
// (its claim sent with BEGIN, the stored answer with COMMIT, as the endpoint sends them) and none of the
// endpoint's code, so a row splits protection's cost into the database's share (statements ÷ unprotected)
// and the integration's (protected ÷ statements): what no integration can go below, and what it adds.
// The reference row, "express-idempotency" on PostgreSQL, is the same order behind the registry's
// express-idempotency with its Redis adapter (the key in Redis, outside the order's transaction); it runs
// when redis-server is on PATH and both packages are installed, else the bench says why it skipped it:
//   apt-get install redis-server
//   (cd server/node && npm install --no-save express-idempotency@1.0.6 express-idempotency-redis-adapter@1.0.8)
import { spawn, spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import http from "node:http";
import net from "node:net";
import { loadavg, tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { fileURLToPath } from "node:url";

const HERE = fileURLToPath(import.meta.url);
const FRAMEWORKS = ["express", "fastify", "hono", "hono-response", "next", "next-response"];
/** Whether a row's handler answers with a `Response` the integration reads back (else as the README shows). */
const readsBack = (framework) => framework.endsWith("-response");
const ORDERS = "CREATE TABLE IF NOT EXISTS orders (id SERIAL PRIMARY KEY, sku TEXT NOT NULL)";
const BODY = JSON.stringify({ sku: "mug" });

/** What `--tracing` registers in its traced child: the SDK set up as an app would, spans batched to an exporter that drops them. */
async function registerTracing() {
  const { context, metrics, propagation, trace } = await import("@opentelemetry/api");
  const { AsyncLocalStorageContextManager } = await import("@opentelemetry/context-async-hooks");
  const { W3CTraceContextPropagator } = await import("@opentelemetry/core");
  const { MeterProvider, MetricReader } = await import("@opentelemetry/sdk-metrics");
  const { BasicTracerProvider, BatchSpanProcessor } = await import("@opentelemetry/sdk-trace-base");
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  let exported = 0;
  const dropping = {
    export: (spans, done) => {
      exported += spans.length;
      done({ code: 0 });
    },
    shutdown: async () => {},
  };
  // Says on stderr that the traced side traced (the spans the batch processor handed over).
  process.on("SIGTERM", () => {
    console.error(`traced server: ${exported} spans exported`);
    process.exit(0);
  });
  trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(dropping)] }));
  class Kept extends MetricReader {
    async onForceFlush() {}
    async onShutdown() {}
  }
  metrics.setGlobalMeterProvider(new MeterProvider({ readers: [new Kept()] }));
}

/** The child: `framework` serving POST /protected, /plain and /statements on the database `spec`; prints its port. */
async function serve(framework, spec, redisUrl, tracing) {
  if (tracing === "traced") await registerTracing();
  const { idempotentEndpoint, constants } = await import("idempotent-endpoint");
  const sql = constants.sql;
  // The lock name and the retention cutoff the endpoint's claim takes, from the package's own core.
  const core = createRequire(import.meta.url)("../dist/core.js");
  let database;
  if (spec.startsWith("pglite:")) {
    const { PGlite } = await import("@electric-sql/pglite");
    database = new PGlite(spec.slice("pglite:".length));
  } else {
    const { default: pg } = await import("pg");
    database = new pg.Pool({ connectionString: spec, max: 16 });
  }
  const endpoint = idempotentEndpoint({ database });
  await endpoint.install();
  await endpoint.store.exec(ORDERS);
  /** The business write, the same in both routes. */
  const order = async (q, json) => ({ status: 201, body: { id: (await q.query("INSERT INTO orders (sku) VALUES ($1) RETURNING id", [json.sku])).rows[0].id } });
  /** The unprotected route's work: the order in a transaction of its own. */
  const plain = (json) => endpoint.store.transaction(async (q) => ({ commit: true, value: await order(q, json) }));
  /** The unprotected route's work with the key row's statements as the endpoint sends them (a fresh key), no endpoint code. */
  const statements = (json) => {
    const key = randomUUID();
    const now = Math.floor(Date.now() / 1000);
    const claim = { text: sql.claimKey, params: [core.lockName("public", key), "public", key, "0".repeat(64), now, core.expiredBefore(now, 86400)] };
    const answer = { text: sql.storeAnswer, params: [201, '[["content-type","application/json"]]', '{"id":1}', "public", key] };
    return endpoint.store.transaction(async (q) => ({ commit: true, value: await order(q, json), last: answer }), claim);
  };
  let port;
  if (framework === "express-idempotency") {
    const { default: express } = await import("express");
    const lib = await import("express-idempotency");
    const { idempotency, getSharedIdempotencyService } = lib.default ?? lib;
    const adapter = await import("express-idempotency-redis-adapter");
    const RedisAdapter = adapter.default?.default ?? adapter.default;
    const dataAdapter = new RedisAdapter({ connectionConfig: { url: redisUrl } });
    await dataAdapter.connect();
    const app = express();
    // Its intent check compares the parsed body, so the body parser goes first, as its README shows.
    app.post("/protected", express.json(), idempotency({ dataAdapter }), async (req, res) => {
      if (getSharedIdempotencyService().isHit(req)) return;
      const { status, body } = await plain(req.body);
      res.status(status).json(body);
    });
    app.post("/plain", express.json(), async (req, res) => {
      const { status, body } = await plain(req.body);
      res.status(status).json(body);
    });
    port = await new Promise((resolve) => {
      const s = app.listen(0, "127.0.0.1", () => resolve(s.address().port));
    });
  } else if (framework === "express") {
    const { default: express } = await import("express");
    const { idempotent } = await import("idempotent-endpoint");
    const app = express();
    app.post("/protected", idempotent(endpoint, async ({ tx, json }) => order(tx, json)));
    app.post("/plain", express.json(), async (req, res) => {
      const { status, body } = await plain(req.body);
      res.status(status).json(body);
    });
    app.post("/statements", express.json(), async (req, res) => {
      const { status, body } = await statements(req.body);
      res.status(status).json(body);
    });
    port = await new Promise((resolve) => {
      const s = app.listen(0, "127.0.0.1", () => resolve(s.address().port));
    });
  } else if (framework === "fastify") {
    const { default: Fastify } = await import("fastify");
    const { idempotentPlugin } = await import("idempotent-endpoint/fastify");
    const app = Fastify();
    await app.register(idempotentPlugin, { endpoint });
    app.post("/protected", { config: { idempotent: true } }, async (request, reply) => {
      const { status, body } = await order(request.idempotency.tx, request.idempotency.json);
      return reply.code(status).send(body);
    });
    app.post("/plain", async (request, reply) => {
      const { status, body } = await plain(request.body);
      return reply.code(status).send(body);
    });
    app.post("/statements", async (request, reply) => {
      const { status, body } = await statements(request.body);
      return reply.code(status).send(body);
    });
    port = new URL(await app.listen({ port: 0, host: "127.0.0.1" })).port;
  } else {
    const { serve: listen } = await import("@hono/node-server");
    let fetch;
    if (framework.startsWith("hono")) {
      const { Hono } = await import("hono");
      const { idempotency } = await import("idempotent-endpoint/hono");
      const app = new Hono();
      const plainAnswer = !readsBack(framework);
      app.post("/protected", idempotency(endpoint), async (c) => {
        const { tx, json, answer } = c.get("idempotency");
        const { status, body } = await order(tx, json);
        return plainAnswer ? answer({ status, body }) : c.json(body, status);
      });
      app.post("/plain", async (c) => {
        const { status, body } = await plain(await c.req.json());
        return c.json(body, status);
      });
      app.post("/statements", async (c) => {
        const { status, body } = await statements(await c.req.json());
        return c.json(body, status);
      });
      fetch = app.fetch;
    } else {
      const { idempotentRoute } = await import("idempotent-endpoint/next");
      const plainAnswer = !readsBack(framework);
      const protectedRoute = idempotentRoute(endpoint, async (_request, { tx, json }) => {
        const { status, body } = await order(tx, json);
        return plainAnswer ? { status, body } : Response.json(body, { status });
      });
      const unprotected = (work) => async (request) => {
        const { status, body } = await work(await request.json());
        return Response.json(body, { status });
      };
      const routes = { "/protected": protectedRoute, "/plain": unprotected(plain), "/statements": unprotected(statements) };
      fetch = (request) => routes[new URL(request.url).pathname](request);
    }
    port = await new Promise((resolve) => {
      const s = listen({ fetch, port: 0, hostname: "127.0.0.1" }, () => resolve(s.address().port));
    });
  }
  process.stdout.write(`${JSON.stringify({ port })}\n`);
}

/** Starts a server child; resolves to its base URL and the child. */
function startServer(framework, spec, redisUrl = "", tracing = "") {
  const child = spawn(process.execPath, [HERE, "--serve", framework, spec, redisUrl, tracing], { stdio: ["ignore", "pipe", "inherit"] });
  return new Promise((resolve, reject) => {
    let out = "";
    child.on("exit", (code) => reject(new Error(`${framework} server exited ${code}`)));
    child.stdout.on("data", (d) => {
      out += d;
      if (out.includes("\n")) resolve({ child, base: `http://127.0.0.1:${JSON.parse(out).port}` });
    });
  });
}

/** The incoming trace of `--tracing`'s requests (a sampled parent), as a browser's client would send it. */
const TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/** One POST with a fresh key over `agent`; resolves to its latency in ms (rejects on a status other than 201). */
function post(agent, url, extraHeaders = {}) {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const headers = { "content-type": "application/json", "content-length": Buffer.byteLength(BODY), "idempotency-key": randomUUID(), ...extraHeaders };
    const req = http.request(url, { method: "POST", agent, headers }, (res) => {
      res.resume();
      res.on("end", () => (res.statusCode === 201 ? resolve(performance.now() - started) : reject(new Error(`${url}: ${res.statusCode}`))));
    });
    req.on("error", reject);
    req.end(BODY);
  });
}

/** `concurrency` loops calling `one()` for `seconds`; the latencies of every call. */
async function loops(one, seconds, concurrency) {
  const until = performance.now() + seconds * 1000;
  const latencies = [];
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < until) {
        const started = performance.now();
        await one();
        latencies.push(performance.now() - started);
      }
    }),
  );
  return latencies;
}

/** `concurrency` loops posting to `url` for `seconds`; the latencies of every request. */
async function round(url, seconds, concurrency, extraHeaders = {}) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  const latencies = await loops(() => post(agent, url, extraHeaders), seconds, concurrency);
  agent.destroy();
  return latencies;
}

/** `endpoint.run` (a fresh key, the order in the key row's transaction) against the order in a transaction of its own, without HTTP. */
async function noHttp(url, seconds, rounds, concurrency) {
  const { default: pg } = await import("pg");
  const { idempotentEndpoint } = await import("idempotent-endpoint");
  const pool = new pg.Pool({ connectionString: url, max: 16 });
  try {
    const endpoint = idempotentEndpoint({ database: pool });
    await endpoint.install();
    await pool.query(ORDERS);
    const order = async (q) => ({ status: 201, body: { id: (await q.query("INSERT INTO orders (sku) VALUES ($1) RETURNING id", ["mug"])).rows[0].id } });
    const body = new TextEncoder().encode(BODY);
    const routes = {
      protected: async () => {
        const { outcome } = await endpoint.run({ method: "POST", path: "/protected", keyHeader: [randomUUID()], body }, order);
        if (outcome !== "fresh") throw new Error(`endpoint.run: ${outcome}`);
      },
      plain: () => endpoint.store.transaction(async (q) => ({ commit: true, value: await order(q) })),
    };
    return await alternate((route, s) => loops(routes[route], s, concurrency), seconds, rounds);
  } finally {
    await pool.end();
  }
}

/** A warm-up of each side, then `rounds` alternating rounds of `seconds` each: the latencies per side. */
async function alternate(measure, seconds, rounds, sides = ["protected", "plain"]) {
  for (const side of sides) await measure(side, 0.5);
  const got = Object.fromEntries(sides.map((side) => [side, []]));
  for (let r = 0; r < rounds; r++) {
    const order = r % 2 === 0 ? sides : [...sides].reverse();
    for (const side of order) got[side].push(...(await measure(side, seconds)));
  }
  return got;
}

/** `--tracing`: express's /protected on PostgreSQL, traced child against untraced child, alternating. */
async function tracingCost(cluster, seconds, rounds, concurrency) {
  const servers = {};
  try {
    for (const side of ["traced", "untraced"]) {
      cluster.createDatabase(`tracing_${side}`);
      servers[side] = await startServer("express", cluster.url(`tracing_${side}`), "", side);
    }
    const got = await alternate((side, s) => round(`${servers[side].base}/protected`, s, concurrency, { traceparent: TRACEPARENT }), seconds, rounds, ["traced", "untraced"]);
    return { t: summary(got.traced, seconds * rounds), u: summary(got.untraced, seconds * rounds) };
  } finally {
    for (const server of Object.values(servers)) server.child.kill("SIGTERM");
  }
}

const percentile = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];

function summary(latencies, seconds) {
  const sorted = [...latencies].sort((a, b) => a - b);
  return { rps: latencies.length / seconds, p50: percentile(sorted, 50), p99: percentile(sorted, 99) };
}

/** Why the reference row cannot run here, or null when redis-server and both packages are there. */
function referenceMissing() {
  if (spawnSync("redis-server", ["--version"]).status !== 0) return "redis-server is not on PATH (apt-get install redis-server)";
  const require = createRequire(import.meta.url);
  for (const name of ["express-idempotency", "express-idempotency-redis-adapter"]) {
    try {
      require.resolve(name);
    } catch {
      return `${name} is not installed (cd server/node && npm install --no-save express-idempotency@1.0.6 express-idempotency-redis-adapter@1.0.8)`;
    }
  }
  return null;
}

/** A throwaway redis-server on a free port, keeping nothing on disk; resolves once it accepts connections. */
async function startRedis() {
  const port = await new Promise((resolve) => {
    const s = net.createServer().listen(0, "127.0.0.1", () => {
      const { port: free } = s.address();
      s.close(() => resolve(free));
    });
  });
  const child = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], { stdio: "ignore" });
  for (let i = 0; i < 100; i++) {
    const up = await new Promise((resolve) => {
      const socket = net.connect(port, "127.0.0.1", () => (socket.end(), resolve(true)));
      socket.on("error", () => resolve(false));
    });
    if (up) return { child, url: `redis://127.0.0.1:${port}` };
    await new Promise((r) => setTimeout(r, 50));
  }
  child.kill("SIGTERM");
  throw new Error("redis-server did not start");
}

/** `framework`'s server on `spec`, both routes measured: a row. */
async function measure(framework, db, spec, seconds, rounds, concurrency, redisUrl) {
  const { child, base } = await startServer(framework, spec, redisUrl);
  try {
    const sides = framework === "express-idempotency" ? ["protected", "plain"] : ["protected", "plain", "statements"];
    const got = await alternate((route, s) => round(`${base}/${route}`, s, concurrency), seconds, rounds, sides);
    console.error(`${framework} on ${db}: done`);
    const st = got.statements === undefined ? undefined : summary(got.statements, seconds * rounds);
    return { framework, db, p: summary(got.protected, seconds * rounds), u: summary(got.plain, seconds * rounds), st };
  } finally {
    child.kill("SIGTERM");
  }
}

async function main() {
  const { values } = parseArgs({
    options: { seconds: { type: "string", default: "2" }, rounds: { type: "string", default: "3" }, concurrency: { type: "string", default: "8" }, tracing: { type: "boolean", default: false }, frameworks: { type: "string", default: FRAMEWORKS.join(",") }, databases: { type: "string", default: "postgres,pglite" }, durable: { type: "boolean", default: false } },
  });
  const seconds = Number(values.seconds);
  const rounds = Number(values.rounds);
  const concurrency = Number(values.concurrency);
  const { startCluster } = await import("../../../tests/fault/pg-cluster.mjs");
  const cluster = await startCluster({ durable: values.durable });
  if (values.tracing) {
    const load = [loadavg()[0]];
    let got;
    try {
      got = await tracingCost(cluster, seconds, rounds, concurrency);
    } finally {
      cluster.stop();
    }
    load.push(loadavg()[0]);
    const f = (n) => n.toFixed(2);
    console.log(`node ${process.version}, express on PostgreSQL, ${concurrency} connections, ${rounds} alternating rounds of ${seconds} s per side; each request a fresh key and a traceparent; load average ${load.map((l) => l.toFixed(1)).join(" -> ")}`);
    console.log("| | req/s | p50 ms | p99 ms |");
    console.log("|---|---:|---:|---:|");
    console.log(`| traced (SDK, batch processor) | ${got.t.rps.toFixed(0)} | ${f(got.t.p50)} | ${f(got.t.p99)} |`);
    console.log(`| untraced (API, no provider) | ${got.u.rps.toFixed(0)} | ${f(got.u.p50)} | ${f(got.u.p99)} |`);
    console.log(`| traced ÷ untraced | ${(got.t.rps / got.u.rps).toFixed(2)}x | ${(got.t.p50 / got.u.p50).toFixed(2)}x | ${(got.t.p99 / got.u.p99).toFixed(2)}x |`);
    return;
  }
  const dir = mkdtempSync(path.join(tmpdir(), "idempotent-endpoint-bench-"));
  const rows = [];
  const notes = [];
  const load = [loadavg()[0]];
  try {
    cluster.createDatabase("no_http");
    const got = await noHttp(cluster.url("no_http"), seconds, rounds, concurrency);
    rows.push({ framework: "(no HTTP)", db: "postgres", p: summary(got.protected, seconds * rounds), u: summary(got.plain, seconds * rounds) });
    console.error("endpoint.run without HTTP: done");
    for (const db of values.databases.split(",")) {
      for (const framework of values.frameworks.split(",")) {
        const name = `${framework}_${db}`.replace(/[^a-z_]/g, "");
        let spec;
        if (db === "postgres") {
          cluster.createDatabase(name);
          spec = cluster.url(name);
        } else spec = `pglite:${path.join(dir, name)}`;
        rows.push(await measure(framework, db, spec, seconds, rounds, concurrency));
      }
    }
    const missing = referenceMissing();
    if (missing === null) {
      const redis = await startRedis();
      try {
        cluster.createDatabase("reference");
        rows.push(await measure("express-idempotency", "postgres", cluster.url("reference"), seconds, rounds, concurrency, redis.url));
      } finally {
        redis.child.kill("SIGTERM");
      }
    } else notes.push(`reference row (express-idempotency + Redis) skipped: ${missing}`);
    load.push(loadavg()[0]);
  } finally {
    cluster.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  const f = (n) => n.toFixed(2);
  console.log(`node ${process.version}, ${concurrency} connections, ${rounds} alternating rounds of ${seconds} s per route; PostgreSQL with fsync ${values.durable ? "on" : "off"}; each request a fresh key; load average ${load.map((l) => l.toFixed(1)).join(" -> ")}`);
  console.log("| framework | database | protected req/s | p50 ms | p99 ms | unprotected req/s | p50 ms | p99 ms | p50 ratio | p50 added ms | req/s ratio | statements p50 ms | statements ÷ unprotected | protected ÷ statements |");
  console.log("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
  for (const { framework, db, p, u, st } of rows) {
    const split = st === undefined ? "| | | |" : `| ${f(st.p50)} | ${(st.p50 / u.p50).toFixed(2)}x | ${(p.p50 / st.p50).toFixed(2)}x |`;
    console.log(`| ${framework} | ${db} | ${p.rps.toFixed(0)} | ${f(p.p50)} | ${f(p.p99)} | ${u.rps.toFixed(0)} | ${f(u.p50)} | ${f(u.p99)} | ${(p.p50 / u.p50).toFixed(2)}x | ${(p.p50 - u.p50).toFixed(2)} | ${(p.rps / u.rps).toFixed(2)}x ${split}`);
  }
  for (const note of notes) console.log(note);
  // The bar is on each framework as the README shows it; the Response forms are reported beside it.
  const over = (names) => rows.filter((r) => r.db === "postgres" && names.includes(r.framework) && r.p.p50 / r.u.p50 > 1.5).map((r) => r.framework);
  const shown = over(FRAMEWORKS.filter((name) => !readsBack(name)));
  const responses = over(FRAMEWORKS.filter(readsBack));
  console.log(shown.length === 0 ? "bar met: protected p50 <= 1.5x unprotected p50 on PostgreSQL for every framework as the README shows it" : `bar missed on PostgreSQL: ${shown.join(", ")}`);
  if (responses.length > 0) console.log(`over 1.5x on PostgreSQL with a Response read back: ${responses.join(", ")}`);
  process.exitCode = shown.length === 0 ? 0 : 1;
}

if (process.argv[2] === "--serve") await serve(process.argv[3], process.argv[4], process.argv[5], process.argv[6]);
else await main();
