// The servers behind the proxy: the reference server (supervised: restarted after a crash), the payment
// provider and the mail receiver, and with --pg a PostgreSQL cluster with several server instances on it.
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { startCluster } from "./pg-cluster.mjs";
import { pkgDir } from "../support/paths.mjs";
import { startService, startSupervisedServer } from "../support/reference-server.mjs";
import { here, INSTANCES, CHECKOUT, KEY_LEASE_MS, PROVIDER_FAULTS, MAILBOX_FAULTS } from "./options.mjs";
import { figures, problem, bump } from "./report.mjs";


/**
 * One server instance (tests/support/reference-server.mjs: IF_SERVER_BIN or target/release, built
 * when missing; killed at process exit if still running) serving the fault page and the package (pkg/), on a
 * temp SQLite db, or on PostgreSQL when `databaseUrl` is given.
 */
export function startServer({ databaseUrl, downstream } = {}) {
  const args = downstream ? ["--provider-url", downstream.provider.url, "--mail-url", downstream.mailbox.url, "--key-lease-ms", String(KEY_LEASE_MS)] : [];
  const dbDir = databaseUrl ? null : mkdtempSync(path.join(os.tmpdir(), "if-fault-"));
  const options = { www: path.join(here, "www"), pkg: pkgDir, label: "fault", databaseUrl, args, startTimeoutMs: 20_000 };
  if (dbDir) options.dbFile = path.join(dbDir, "fault.sqlite");
  return startSupervisedServer(options, {
    onCrash: ({ code, signal }) => { figures.crashes.crashes += 1; bump(figures.crashes.signals, signal ?? `exit ${code}`); },
    onRestart: () => { figures.crashes.restarts += 1; },
    onGiveUp: (error) => problem(`restarting the crashed server failed: ${error.message}`),
    cleanup: () => { if (dbDir) rmSync(dbDir, { recursive: true, force: true }); },
  });
}

/** The payment provider and the mail receiver (real processes), or none with --no-checkout. */
export async function startDownstream(cleanups) {
  if (!CHECKOUT) return null;
  const provider = await startService("payment-provider", { label: "fault-provider" });
  cleanups.push(() => provider.stop());
  const mailbox = await startService("mail-receiver", { label: "fault-mail" });
  cleanups.push(() => mailbox.stop());
  console.log(`payment provider ${provider.url}, mail receiver ${mailbox.url}, key lease ${KEY_LEASE_MS} ms`);
  return { provider, mailbox };
}

/** The fault configuration is per instance: set it on every one. */
export async function putFaults(servers, faults) {
  for (const server of servers) await server.setFaults(faults);
}

/** Every instance answers GET /api/health with the expected store. */
export async function checkHealth(servers, store) {
  for (const server of servers) {
    const response = await fetch(`${server.url}/api/health`);
    const health = await response.json().catch(() => ({}));
    if (!response.ok || health.store !== store) throw new Error(`${server.url}/api/health: ${response.status} ${JSON.stringify(health)}, expected store ${store}`);
  }
}

/** The multi-instance back end: a PostgreSQL cluster, a database, INSTANCES servers on it. */
export async function startPgBackend(cleanups, downstream) {
  const cluster = await startCluster();
  cleanups.push(() => cluster.stop());
  cluster.createDatabase("fault");
  const databaseUrl = cluster.url("fault");
  console.log(`PostgreSQL cluster on port ${cluster.port} (${cluster.bin}), database ${databaseUrl}`);
  const servers = [];
  const started = await Promise.allSettled(Array.from({ length: INSTANCES }, () => startServer({ databaseUrl, downstream })));
  for (const s of started) if (s.status === "fulfilled") { servers.push(s.value); cleanups.push(() => s.value.stop()); }
  const failed = started.find((s) => s.status === "rejected");
  if (failed) throw failed.reason;
  await checkHealth(servers, "postgres");
  return servers;
}

/** Every probabilistic fault of the provider and the receiver, or none. */
export async function putDownstreamFaults(downstream, on) {
  if (!downstream) return;
  await downstream.provider.setFaults(on ? PROVIDER_FAULTS : {});
  await downstream.mailbox.setFaults(on ? MAILBOX_FAULTS : {});
}
