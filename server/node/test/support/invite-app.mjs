// examples/invite-express as a user gets it, for the tests that drive it: the folder copied as it is in the
// repository (no node_modules), next to `npm pack` of server/node unpacked where its
// `file:../../server/node` dependency looks (installed as packed: its .npmrc sets install-links), `npm ci`,
// then app.mjs and receiver.mjs started as Node processes on 127.0.0.1.
//
//   installExample(tmpDir)          → the installed example's folder
//   startNode(dir, script, env)     → { url, pid, kill(signal), stop(), exited }: the process, once it listens
//   startFaultyProxy(target, plan)  → { url, close() }: a proxy answering 503 or losing answers as `plan` says
import { spawn, spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync } from "node:fs";
import http from "node:http";
import path from "node:path";
import { fileURLToPath } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, "../../../..");
const EXAMPLE = "examples/invite-express";

function run(command, args, cwd) {
  const result = spawnSync(command, args, { cwd, encoding: "utf8", maxBuffer: 64 << 20 });
  if (result.error) throw new Error(`${command}: ${result.error.message}`);
  if (result.status !== 0) throw new Error(`${command} ${args.join(" ")} failed (${result.status}) in ${cwd}\n${result.stdout}\n${result.stderr}`.trim());
  return result.stdout;
}

/** Copies the example and the packed server package into `tmpDir`, installs it; returns the example's folder. */
export function installExample(tmpDir) {
  const checkout = path.join(tmpDir, "checkout");
  const packed = path.join(checkout, "server/node");
  mkdirSync(packed, { recursive: true });
  const [{ filename }] = JSON.parse(run("npm", ["pack", path.join(ROOT, "server/node"), "--json", "--pack-destination", tmpDir], tmpDir));
  run("tar", ["-xzf", path.join(tmpDir, filename), "--strip-components=1", "-C", packed], tmpDir);
  const app = path.join(checkout, EXAMPLE);
  cpSync(path.join(ROOT, EXAMPLE), app, { recursive: true, filter: (source) => !/[/\\]node_modules$/.test(source) });
  run("npm", ["ci", "--no-audit", "--no-fund"], app);
  if (!existsSync(path.join(app, "node_modules/idempotent-endpoint/dist/index.js"))) throw new Error("npm ci did not install idempotent-endpoint");
  return app;
}

/** Starts `node script` in `dir` with `env` (PORT 0) and resolves once it prints the URL it listens on. */
export function startNode(dir, script, env) {
  const child = spawn(process.execPath, [script], { cwd: dir, env: { ...process.env, PORT: "0", ...env }, stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  const exited = new Promise((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${script} did not start in 20 s:\n${output}`)), 20_000);
    const onData = (chunk) => {
      output += chunk;
      const found = /on (http:\/\/127\.0\.0\.1:\d+)/.exec(output);
      if (found) {
        clearTimeout(timer);
        child.stdout.off("data", onData);
        child.stdout.resume();
        resolve({
          url: found[1],
          pid: child.pid,
          exited,
          output: () => output,
          kill: (signal) => child.kill(signal),
          async stop() {
            if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
            await exited;
          },
        });
      }
    };
    child.stdout.setEncoding("utf8").on("data", onData);
    child.stderr.setEncoding("utf8").on("data", (chunk) => (output += chunk));
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`${script} exited (${code ?? signal}) before listening:\n${output}`));
    });
  });
}

/**
 * A proxy in front of `target`: for each request, `plan({ method, path, headers })` says `"503"` (answered
 * 503 with `Retry-After: 0` before anything is forwarded), `"lose"` (forwarded, the server answers, the
 * client's connection is reset instead) or anything else (passed through).
 */
export function startFaultyProxy(target, plan) {
  const upstream = new URL(target);
  const agent = new http.Agent({ keepAlive: false });
  const server = http.createServer((req, res) => {
    const fate = plan({ method: req.method, path: new URL(req.url, "http://x").pathname, headers: req.headers });
    if (fate === "503") {
      req.resume();
      res.writeHead(503, { "retry-after": "0", "content-type": "application/problem+json" }).end('{"title":"unavailable"}');
      return;
    }
    const forward = http.request({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers, agent }, (answer) => {
      if (fate === "lose") {
        answer.resume();
        answer.on("end", () => res.socket?.resetAndDestroy?.() ?? res.destroy());
        return;
      }
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    forward.on("error", () => res.destroy());
    req.pipe(forward);
  });
  return new Promise((resolve) => {
    server.listen(0, "127.0.0.1", () => {
      resolve({ url: `http://127.0.0.1:${server.address().port}`, close: () => new Promise((r) => server.close(() => r())) });
    });
  });
}
