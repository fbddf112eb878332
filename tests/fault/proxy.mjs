// The network faults: a proxy in front of the servers that resets connections, holds answers until the
// client's attempt deadline, and counts every attempt and what it got.
import http from "node:http";
import { random, between, SERVER_FAULTS, PROXY_FAULTS, RETRY } from "./options.mjs";
import { figures, bump } from "./report.mjs";

/** Forwards to the upstreams round-robin (every request, so one key's retries hop between them). */
export function startProxy(upstreams) {
  const targets = upstreams.map((u) => new URL(u));
  let next = 0;
  const agent = new http.Agent({ keepAlive: true, maxSockets: 128 });
  const state = { on: true };
  const p = figures.proxy;
  const latencies = figures.serverLatencies;
  const server = http.createServer((req, res) => {
    const isOrder = req.method === "POST" && req.url.startsWith("/api/orders");
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      let finished = false;
      let destroyedByUs = false;
      const kill = () => { destroyedByUs = true; req.socket.destroy(); };
      if (isOrder) {
        p.attempts += 1;
        res.on("close", () => { if (!finished && !destroyedByUs) p.clientGaveUp += 1; });
        if (state.on && random() < PROXY_FAULTS.resetBefore) {
          p.resetBefore += 1;
          kill();
          return;
        }
      }
      const t0 = Date.now();
      const headers = { ...req.headers };
      delete headers.connection;
      const instance = next;
      next = (next + 1) % targets.length;
      const target = targets[instance];
      if (isOrder) noteInstance(instance, req.headers["idempotency-key"]);
      const up = http.request({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers, agent }, (upRes) => {
        const parts = [];
        upRes.on("data", (c) => parts.push(c));
        upRes.on("end", () => {
          const answer = Buffer.concat(parts);
          const status = upRes.statusCode;
          if (isOrder) {
            const took = Date.now() - t0;
            if (took >= SERVER_FAULTS.latencyMs) p.slowAnswers += 1;
            latencies.push(took);
            if (status === 201 && upRes.headers["idempotent-replayed"] === "true") p.replayed201 += 1;
            else if (status === 201) p.answered201 += 1;
            else if (status === 503) p.status503 += 1;
            else if (status === 429) p.status429 += 1;
            else if (status === 409) p.status409 += 1;
            else bump(p.otherStatus, status);
            if (state.on && random() < PROXY_FAULTS.resetAfter) {
              p.resetAfter += 1;
              kill();
              return;
            }
          }
          const out = { ...upRes.headers, "content-length": String(answer.length) };
          delete out["transfer-encoding"];
          delete out.connection;
          delete out["keep-alive"];
          const deliver = () => {
            if (res.destroyed) return;
            finished = true;
            res.writeHead(status, out);
            res.end(answer);
          };
          if (!(isOrder && state.on && random() < PROXY_FAULTS.atDeadline)) return deliver();
          p.atDeadline += 1;
          const headersAt = t0 + RETRY.attemptTimeoutMs + between(-20, 5);
          const bodyAfter = between(0, 20);
          setTimeout(() => {
            if (res.destroyed) return;
            res.writeHead(status, out);
            res.flushHeaders();
            setTimeout(() => {
              if (res.destroyed) return;
              finished = true;
              res.end(answer);
            }, bodyAfter);
          }, Math.max(0, headersAt - Date.now()));
        });
      });
      up.on("error", () => {
        // the server closed without answering: its drop-after-commit fault
        if (isOrder) p.dropAfterCommit += 1;
        kill();
      });
      up.end(body);
    });
  });
  return new Promise((resolve) => {
    server.listen(0, "127.0.0.1", () => {
      resolve({
        url: `http://127.0.0.1:${server.address().port}`,
        state,
        close: () => new Promise((done) => { server.closeAllConnections(); server.close(() => done()); agent.destroy(); }),
      });
    });
  });
}

export function noteInstance(instance, key) {
  const { spread } = figures;
  spread.perInstance[instance] += 1;
  if (!key) return;
  if (!spread.keys.has(key)) spread.keys.set(key, new Set());
  spread.keys.get(key).add(instance);
}
