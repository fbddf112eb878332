// `cargo xtask demo` as a process manager or a terminal stops it: SIGTERM or SIGINT sent to the
// xtask process alone ends it, and with it the reference server, the payment provider, the mail
// receiver and the trace receiver, whose ports are free again. (Ctrl-C in a terminal signals the whole process group;
// a process manager signals only the process it started.)
//
// Needs: cargo, the package and the server binaries (the demo builds what is missing).
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import net from "node:net";
import { createInterface } from "node:readline";

import { root } from "../../tests/support/paths.mjs";

/** Whether something accepts connections on 127.0.0.1:`port`. */
const listening = (port) =>
  new Promise((resolve) => {
    const socket = net.connect({ host: "127.0.0.1", port }, () => { socket.destroy(); resolve(true); });
    socket.on("error", () => resolve(false));
  });

/**
 * The first port the kernel hands out to outgoing connections. A port in that range can be held
 * by any connection on the machine (a browser's, another test's) without listening, so a probe
 * finds it free and the bind still fails: the demo's ports are taken below it.
 */
function ephemeralLow() {
  try {
    const low = Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]);
    if (Number.isInteger(low) && low > 12_000) return low;
  } catch {
    // Not Linux: the IANA dynamic range starts at 49152, Linux's default at 32768.
  }
  return 32_768;
}

/** A base port whose next three are free too (the demo uses port to port + 3). */
async function freePorts() {
  const low = 10_000;
  const span = ephemeralLow() - 4 - low;
  for (;;) {
    const port = low + Math.floor(Math.random() * span);
    const taken = await Promise.all([port, port + 1, port + 2, port + 3].map(listening));
    if (!taken.some(Boolean)) return port;
  }
}

for (const signal of ["SIGTERM", "SIGINT"]) {
  test(`${signal} to cargo xtask demo stops the server, the provider, the mail receiver and the trace receiver`, { timeout: 300_000 }, async () => {
    const port = await freePorts();
    const ports = [port, port + 1, port + 2, port + 3];
    // `cargo run` replaces itself with the xtask process (exec): the pid is xtask's.
    const demo = spawn("cargo", ["xtask", "demo", "--port", String(port)], { cwd: root, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    demo.stderr.on("data", (d) => { output += d; });
    const exited = new Promise((resolve) => demo.on("exit", (code, sig) => resolve(sig ?? code)));
    await new Promise((resolve, reject) => {
      createInterface({ input: demo.stdout }).on("line", (line) => {
        output += `${line}\n`;
        if (line.startsWith("== demo at")) resolve();
      });
      exited.then((how) => reject(new Error(`the demo ended (${how}) before it served:\n${output}`)));
    });
    // The provider and the two receivers listen before that line; the server starts after it.
    const until = Date.now() + 30_000;
    while (!(await listening(port)) && Date.now() < until) await new Promise((r) => setTimeout(r, 100));
    assert.deepEqual(await Promise.all(ports.map(listening)), [true, true, true, true], "the four services listen");
    demo.kill(signal);
    const how = await Promise.race([exited, new Promise((r) => setTimeout(() => r("still running after 15 s"), 15_000))]);
    assert.equal(how, 0, `the demo ends cleanly:\n${output}`);
    assert.deepEqual(await Promise.all(ports.map(listening)), [false, false, false, false], `every port is free again:\n${output}`);
  });
}
