// A throwaway PostgreSQL cluster for the fault harness's multi-instance mode (run.mjs --pg), the
// same way server/tests/postgres.rs makes one: initdb in a temp dir, pg_ctl start on 127.0.0.1 with
// a free port, trust auth, fsync off (`durable: true` keeps PostgreSQL's default, fsync on, for a
// benchmark whose figure should include durable commits). As root it runs as the `postgres` user (or `nobody`) through
// runuser, since PostgreSQL refuses to run as root. The cluster is stopped (pg_ctl -m immediate) and
// its directory removed by stop(), and also, synchronously, when the process exits for any reason.
//
// Binaries: env IF_PG_BINDIR (the xtask's installer finds them and sets it), then PATH.
import { spawnSync } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";

const NEEDED = ["initdb", "pg_ctl", "postgres", "createdb"];

/** The directory holding initdb, pg_ctl, postgres and createdb, or null. */
export function findPgBinDir() {
  const hasAll = (dir) => NEEDED.every((b) => existsSync(path.join(dir, b)));
  const candidates = [];
  if (process.env.IF_PG_BINDIR) candidates.push(process.env.IF_PG_BINDIR);
  candidates.push(...(process.env.PATH ?? "").split(path.delimiter).filter(Boolean));
  return candidates.find(hasAll) ?? null;
}

function run(argv, what) {
  const out = spawnSync(argv[0], argv.slice(1), { encoding: "utf8" });
  if (out.error) throw new Error(`${what}: ${out.error.message}`);
  if (out.status !== 0) throw new Error(`${what} failed (exit ${out.status}):\n${out.stdout}${out.stderr}`);
  return out.stdout;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/**
 * Starts a cluster. Returns { port, dir, log, url(db), createDatabase(name), stop() }.
 * Throws if the binaries are missing or the cluster does not start (after 3 ports).
 */
/** Starts a cluster; `durable` keeps fsync on (PostgreSQL's default). */
export async function startCluster({ durable = false } = {}) {
  const bin = findPgBinDir();
  if (!bin) throw new Error(`PostgreSQL binaries (${NEEDED.join(", ")}) not found in IF_PG_BINDIR or on PATH (\`cargo xtask install\` installs PostgreSQL and \`cargo xtask test\` sets IF_PG_BINDIR)`);
  const dir = mkdtempSync(path.join(tmpdir(), "if-fault-pg-"));
  const data = path.join(dir, "data");
  const log = path.join(dir, "postgres.log");
  let runAs = null;
  if (process.getuid?.() === 0) {
    runAs = spawnSync("id", ["-u", "postgres"]).status === 0 ? "postgres" : "nobody";
    const uid = Number(run(["id", "-u", runAs], "id -u"));
    const gid = Number(run(["id", "-g", runAs], "id -g"));
    chownSync(dir, uid, gid);
  }
  // the server side (initdb, pg_ctl) as runAs; clients (createdb) as ourselves
  const asServer = (program, ...args) => (runAs ? ["runuser", "-u", runAs, "--", path.join(bin, program), ...args] : [path.join(bin, program), ...args]);

  let running = false;
  let removed = false;
  const stopSync = () => {
    if (running) {
      running = false;
      const [program, ...args] = asServer("pg_ctl", "-D", data, "-m", "immediate", "-w", "stop");
      const out = spawnSync(program, args, { encoding: "utf8" });
      if (out.status !== 0) console.error(`could not stop the PostgreSQL cluster in ${dir}: ${out.stdout}${out.stderr}`);
    }
    if (!removed) {
      removed = true;
      rmSync(dir, { recursive: true, force: true });
    }
  };
  process.on("exit", stopSync);

  try {
    run(asServer("initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"), "initdb");
    let port = 0;
    let lastError;
    for (let tries = 0; tries < 3 && !running; tries++) {
      port = await freePort();
      const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 ${durable ? "" : "-c fsync=off "}-c max_connections=200`;
      try {
        run(asServer("pg_ctl", "-D", data, "-l", log, "-w", "-t", "30", "-o", options, "start"), "pg_ctl start");
        running = true;
      } catch (error) {
        lastError = `${error.message}\n${existsSync(log) ? readFileSync(log, "utf8").slice(-2000) : ""}`;
      }
    }
    if (!running) throw new Error(`the PostgreSQL cluster did not start:\n${lastError}`);
    return {
      port, dir, log, bin,
      url: (db) => `postgres://postgres@127.0.0.1:${port}/${db}`,
      createDatabase: (name) => run([path.join(bin, "createdb"), "-h", "127.0.0.1", "-p", String(port), "-U", "postgres", name], `createdb ${name}`),
      stop: () => {
        stopSync();
        process.removeListener("exit", stopSync);
      },
    };
  } catch (error) {
    stopSync();
    process.removeListener("exit", stopSync);
    throw error;
  }
}
