// The reference server (server/, binary idempotent-fetch-server) for the Node test runners.
//
//   serverBinary()   env IF_SERVER_BIN (set by the xtask; must exist), else
//                    $CARGO_TARGET_DIR (default target/)/server/idempotent-fetch-server, built with
//                    `cargo build --profile server -p idempotent-fetch-server` when missing
//   startReferenceServer({ www, pkg, label, databaseUrl, dbFile, addr, args, startTimeoutMs, bin })
//                    starts it (or the server binary `bin`, e.g. a build with other features) with --enable-faults on 127.0.0.1:0 (or `addr`: a restart on the same
//                    port) with a fresh SQLite db in its own temp folder (or the file `dbFile`, kept, or
//                    PostgreSQL `databaseUrl`), serving `www` at / and `pkg` (optional) at /pkg/, with
//                    the extra flags `args`; resolves once it printed
//                    `listening on http://127.0.0.1:PORT`, to:
//                      url               http://127.0.0.1:PORT
//                      exited            resolves to { code, signal } when the process ends (a crash
//                                        fault ends it with signal SIGABRT)
//                      stderr()          the last 8 kB it wrote to stderr
//                      session(account)  a session token for the named account (POST /api/session;
//                                        cached): send it as `authorization: Bearer TOKEN`
//                      signIn(context, account)
//                                        puts that session's cookie in a Playwright browser context,
//                                        so its pages act for `account` (the server ignores X-Account-Id)
//                      api(path, { method, account, body })
//                                        fetch + JSON; asserts a 2xx (account: its session's bearer token)
//                      setFaults(faults) PUT /api/faults with NO_FAULTS overridden by `faults`
//                      orders(account)   GET /api/orders for the account
//                      stop()            SIGTERM (SIGKILL after 12 s), removes the temp db and
//                                        resolves to the exit code (null if killed by a signal)
//                    The process is also killed if the test process exits without stop().
//   NO_FAULTS        every probabilistic fault off (the server's /api/faults fields)
//   startSupervisedServer(options, { onCrash, onRestart, onGiveUp, cleanup })
//                    startReferenceServer(options), restarted whenever its process ends on its own (a
//                    crash fault aborts it): on the same port and database, with the faults it last
//                    had; { url, session, setFaults, orders, api, stop } always reach the current process,
//                    retrying while a restart is under way; stop() ends supervision, then runs cleanup()
//   startService(name, { label, startTimeoutMs, args, db })
//                    the workspace's `payment-provider`, `mail-receiver`, `trace-receiver` or
//                    `invite-example` binary (next to the server binary) with `args` (default
//                    --enable-faults) on 127.0.0.1:0 and a temp SQLite db (`db: false`: none, for the
//                    trace receiver, which keeps its traces in memory), to
//                    { url, get(path), setFaults(faults), stop() }; killed at exit
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";

import { root } from "./paths.mjs";

// One session secret for every server this process starts, so a session works on each of them (several
// instances on one PostgreSQL database). Passed in the environment, not on the command line.
const SESSION_SECRET = randomBytes(32).toString("hex");

export const NO_FAULTS = {
  failBeforeWork: 0, dropAfterCommit: 0, status429: 0, retryAfterSecs: 0, latencyMs: 0, latencyProbability: 0, store500: 0,
  crashAfterCharge: 0, crashAfterFinish: 0, crashAfterDelivery: 0,
};

export function serverBinary() {
  if (process.env.IF_SERVER_BIN) {
    if (!existsSync(process.env.IF_SERVER_BIN)) throw new Error(`IF_SERVER_BIN=${process.env.IF_SERVER_BIN} does not exist`);
    return process.env.IF_SERVER_BIN;
  }
  // where the cargo build below puts it (a relative CARGO_TARGET_DIR is relative to its cwd, root)
  const bin = path.resolve(root, process.env.CARGO_TARGET_DIR || "target", "server/idempotent-fetch-server");
  if (!existsSync(bin)) {
    console.log("the reference server is missing: building it (cargo build --profile server -p idempotent-fetch-server)");
    const built = spawnSync("cargo", ["build", "--profile", "server", "-p", "idempotent-fetch-server"], { cwd: root, stdio: ["ignore", "inherit", "inherit"] });
    if (built.error) throw new Error(`cargo: ${built.error.message}`);
    if (built.status !== 0 || !existsSync(bin)) throw new Error(`could not build the reference server (cargo exited ${built.status}); or set IF_SERVER_BIN`);
  }
  return bin;
}

export async function startReferenceServer({ www, pkg, label = "server", databaseUrl, dbFile, addr = "127.0.0.1:0", args: extra = [], startTimeoutMs = 15_000, bin = serverBinary() }) {
  const dbDir = databaseUrl || dbFile ? null : mkdtempSync(path.join(os.tmpdir(), `if-${label}-`));
  const db = databaseUrl ? ["--database-url", databaseUrl] : ["--db", dbFile ?? path.join(dbDir, `${label}.sqlite`)];
  const args = ["--enable-faults", "--addr", addr, ...db, "--www", www, ...extra];
  if (pkg) args.push("--pkg", pkg);
  const { child, url, stderr, removeDb, exited } = await spawnListening(bin, args, { label, startTimeoutMs, dbDir, env: { IF_SESSION_SECRET: SESSION_SECRET } });

  const sessions = new Map();
  async function session(account) {
    if (!sessions.has(account)) {
      const response = await fetch(`${url}/api/session`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ account }) });
      const json = await response.json();
      assert.ok(response.ok, `POST /api/session for ${account}: ${response.status} ${JSON.stringify(json)}`);
      sessions.set(account, json.token);
    }
    return sessions.get(account);
  }

  async function api(pathname, { method = "GET", account, body } = {}) {
    const headers = {};
    if (account) headers.authorization = `Bearer ${await session(account)}`;
    if (body !== undefined) headers["content-type"] = "application/json";
    const response = await fetch(url + pathname, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const json = await response.json();
    assert.ok(response.ok, `${method} ${pathname}: ${response.status} ${JSON.stringify(json)}`);
    return json;
  }

  return {
    url,
    exited,
    stderr,
    session,
    signIn: async (context, account) => context.addCookies([{ name: "if_session", value: await session(account), url, httpOnly: true, sameSite: "Strict" }]),
    api,
    setFaults: (faults) => api("/api/faults", { method: "PUT", body: { ...NO_FAULTS, ...faults } }),
    orders: async (account) => (await api("/api/orders", { account })).orders,
    stop: () => stopChild(child, removeDb),
  };
}

/** SIGTERM (SIGKILL after 12 s), then `cleanup`; resolves to the exit code (null if killed by a signal). */
function stopChild(child, cleanup) {
  return new Promise((done) => {
    const finish = (code) => { cleanup(); done(code); };
    if (child.exitCode !== null || child.signalCode !== null) return finish(child.exitCode);
    const kill = setTimeout(() => child.kill("SIGKILL"), 12_000);
    child.once("exit", (code) => { clearTimeout(kill); finish(code); });
    child.kill("SIGTERM");
  });
}

/**
 * Spawns `bin` with `args` and waits for its `listening on http://127.0.0.1:PORT` line; the child is
 * killed if this process exits first. Resolves to { child, url, stderr(), removeDb(), exited }.
 */
async function spawnListening(bin, args, { label, startTimeoutMs, dbDir, env = {} }) {
  const child = spawn(bin, args, { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...env } });
  const killAtExit = () => child.kill("SIGKILL");
  process.on("exit", killAtExit);
  const exited = new Promise((resolve) => child.once("exit", (code, signal) => {
    process.removeListener("exit", killAtExit);
    resolve({ code, signal });
  }));
  const removeDb = () => { if (dbDir) rmSync(dbDir, { recursive: true, force: true }); };
  let stderr = "";
  child.stderr.on("data", (chunk) => { stderr = (stderr + chunk).slice(-8000); });
  const url = await new Promise((resolve, reject) => {
    let stdout = "";
    const fail = (message) => { clearTimeout(timer); child.kill("SIGKILL"); removeDb(); reject(new Error(`${message}\n${stderr}`)); };
    const timer = setTimeout(() => fail(`${path.basename(bin)} did not start in ${startTimeoutMs / 1000} s`), startTimeoutMs);
    const onExit = (code) => fail(`${path.basename(bin)} exited (${code}) before listening`);
    const onError = (error) => fail(`could not start ${bin}: ${error.message}`);
    child.on("exit", onExit);
    child.on("error", onError);
    child.stdout.on("data", (chunk) => {
      if (stdout === null) return; // listening: keep draining the pipe
      stdout += chunk;
      const match = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(stdout);
      if (!match) return;
      stdout = null;
      clearTimeout(timer);
      child.removeListener("exit", onExit);
      child.removeListener("error", onError);
      resolve(match[1]);
    });
  });

  return { child, url, stderr: () => stderr, removeDb, exited };
}

/** The path of a binary built next to the server binary (`payment-provider`, `mail-receiver`, `invite-example`). */
export function serviceBinary(name) {
  const bin = path.join(path.dirname(serverBinary()), name);
  if (!existsSync(bin)) {
    throw new Error(`${bin} is missing: build it (cargo build --profile server -p idempotent-fetch-server -p invite-example)`);
  }
  return bin;
}

export async function startService(name, { label = name, startTimeoutMs = 15_000, args: flags = ["--enable-faults"], db = true } = {}) {
  const dbDir = mkdtempSync(path.join(os.tmpdir(), `if-${label}-`));
  const args = [...flags, "--addr", "127.0.0.1:0", ...(db ? ["--db", path.join(dbDir, `${label}.sqlite`)] : [])];
  const { child, url, removeDb } = await spawnListening(serviceBinary(name), args, { label, startTimeoutMs, dbDir });
  async function get(pathname) {
    const response = await fetch(url + pathname);
    const json = await response.json();
    assert.ok(response.ok, `GET ${pathname}: ${response.status} ${JSON.stringify(json)}`);
    return json;
  }
  async function setFaults(faults) {
    const response = await fetch(`${url}/faults`, { method: "PUT", headers: { "content-type": "application/json" }, body: JSON.stringify(faults) });
    assert.ok(response.ok, `PUT ${url}/faults: ${response.status}`);
  }
  return { url, get, setFaults, stop: () => stopChild(child, removeDb) };
}

const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export async function startSupervisedServer(options, { onCrash = () => {}, onRestart = () => {}, onGiveUp = () => {}, cleanup = () => {} } = {}) {
  const first = await startReferenceServer(options);
  const restartOptions = { ...options, addr: new URL(first.url).host };
  const state = { current: first, stopping: false, faults: null };
  const watch = (server) => {
    state.current = server;
    server.exited.then(async (how) => {
      if (state.stopping) return;
      onCrash(how);
      for (let attempt = 1; ; attempt++) {
        try {
          const next = await startReferenceServer(restartOptions);
          onRestart();
          if (state.faults) await next.setFaults(state.faults);
          watch(next);
          return;
        } catch (error) {
          if (attempt >= 30 || state.stopping) return onGiveUp(error);
          await pause(200);
        }
      }
    });
  };
  watch(first);
  const retrying = async (what) => {
    for (let attempt = 1; ; attempt++) {
      try { return await what(state.current); } catch (error) {
        if (attempt >= 50) throw error;
        await pause(200);
      }
    }
  };
  return {
    url: first.url,
    session: (account) => retrying((s) => s.session(account)),
    signIn: (context, account) => retrying((s) => s.signIn(context, account)),
    api: (pathname, options) => retrying((s) => s.api(pathname, options)),
    setFaults: (faults) => { state.faults = faults; return retrying((s) => s.setFaults(faults)); },
    orders: (account) => retrying((s) => s.orders(account)),
    stop: async () => {
      state.stopping = true;
      const code = await state.current.stop();
      cleanup();
      return code;
    },
  };
}
