// A service process that a kill run ends with `kill -9` and starts again on the same port and store
// (invite-kills.mjs, inbox-kills.mjs).
import { spawn } from "node:child_process";
import { sleep } from "./options.mjs";

/**
 * One instance of the binary `bin` with `args` (its store) plus `--addr`: `start()` (again on the same port
 * after a kill), `url()`, `kill()` (SIGKILL, resolves once it exited), `stop()` (SIGTERM). It prints
 * `listening on http://127.0.0.1:PORT` once it serves.
 */
export function killable(bin, args, label) {
  const state = { child: null, url: null, addr: "127.0.0.1:0" };
  async function start() {
    const child = spawn(bin, [...args, "--addr", state.addr], { stdio: ["ignore", "pipe", "pipe"] });
    const killAtExit = () => child.kill("SIGKILL");
    process.on("exit", killAtExit);
    const exited = new Promise((resolve) => child.once("exit", () => { process.removeListener("exit", killAtExit); resolve(); }));
    let stderr = "";
    child.stderr.on("data", (c) => { stderr = (stderr + c).slice(-4000); });
    const url = await new Promise((resolve, reject) => {
      let stdout = "";
      const timer = setTimeout(() => { child.kill("SIGKILL"); reject(new Error(`${label} did not start in 15 s\n${stderr}`)); }, 15_000);
      child.once("exit", (code) => { clearTimeout(timer); reject(new Error(`${label} exited (${code}) before listening\n${stderr}`)); });
      child.stdout.on("data", (chunk) => {
        stdout += chunk;
        const match = /listening on (http:\/\/127\.0\.0\.1:(\d+))/.exec(stdout);
        if (match) { clearTimeout(timer); resolve(match[1]); }
      });
    });
    Object.assign(state, { child, exited, url, addr: new URL(url).host });
  }
  return {
    start,
    url: () => state.url,
    kill: async () => { state.child.kill("SIGKILL"); await state.exited; },
    stop: async () => { if (state.child.exitCode === null && state.child.signalCode === null) { state.child.kill("SIGTERM"); await state.exited; } },
  };
}

/** Starts a killed instance again, retrying while its port is still held by the killed process. */
export async function restart(instance) {
  for (let attempt = 1; ; attempt++) {
    try { return await instance.start(); } catch (error) {
      if (attempt >= 20) throw error;
      await sleep(100);
    }
  }
}
