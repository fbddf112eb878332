// A reverse proxy on 127.0.0.1:<free port> in front of one origin, which puts `<script>` with the
// given sources first in every HTML document it passes on: Playwright's context.addInitScript for
// engines driven over classic WebDriver (no preload scripts there). Everything else is passed
// through byte for byte; an upstream connection that dies without an answer (the reference
// server's dropAfterCommit fault) is cut on the browser's side too, so the page sees the same
// network error it would see without the proxy.
//
//   const proxy = await startInjectProxy({ target: "http://127.0.0.1:1234", scripts: () => [src] });
//   proxy.url; await proxy.close();
//
// Optional hooks stand in for Playwright's request events and routes where the driver has none:
//   observe({ method, path, headers })  every request, as it arrives
//   answered({ method, path, status })  every answer's status
//   loseAnswer({ method, path })        true: forward the request, let the server answer, then reset
//                                       the browser's connection instead of passing the answer on
import http from "node:http";

export function startInjectProxy({ target, scripts = () => [], observe, answered, loseAnswer }) {
  const upstream = new URL(target);
  const agent = new http.Agent({ keepAlive: false });
  const server = http.createServer((req, res) => {
    const seen = { method: req.method, path: new URL(req.url, "http://x").pathname, headers: req.headers };
    observe?.(seen);
    const lose = loseAnswer?.(seen) ?? false;
    const headers = { ...req.headers, host: upstream.host };
    delete headers["accept-encoding"]; // HTML must arrive uncompressed to be edited
    const forward = http.request({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers, agent }, (answer) => {
      answered?.({ method: req.method, path: seen.path, status: answer.statusCode });
      if (lose) {
        answer.resume();
        answer.on("end", () => res.socket?.resetAndDestroy?.() ?? res.destroy());
        return;
      }
      const html = /^text\/html/i.test(answer.headers["content-type"] ?? "") && scripts().length > 0;
      if (!html) {
        res.writeHead(answer.statusCode, answer.statusMessage, answer.headers);
        answer.pipe(res);
        answer.on("error", () => res.destroy());
        return;
      }
      const chunks = [];
      answer.on("data", (chunk) => chunks.push(chunk));
      answer.on("error", () => res.destroy());
      answer.on("end", () => {
        const tag = `<script>${scripts().join("\n")}</script>`;
        const text = Buffer.concat(chunks).toString("utf8");
        // First in <head> when there is one (after <meta charset>, which must stay in the first bytes), else first.
        const at = /<meta charset[^>]*>/i.exec(text) ?? /<head[^>]*>/i.exec(text);
        const body = at ? text.slice(0, at.index + at[0].length) + tag + text.slice(at.index + at[0].length) : tag + text;
        const out = { ...answer.headers };
        delete out["content-length"];
        res.writeHead(answer.statusCode, answer.statusMessage, { ...out, "content-length": Buffer.byteLength(body) });
        res.end(body);
      });
    });
    forward.on("error", () => res.destroy()); // connection reset/closed upstream: reset here too
    req.pipe(forward);
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve({
    url: `http://127.0.0.1:${server.address().port}`,
    close: () => new Promise((done) => { server.closeAllConnections?.(); server.close(() => done()); }),
  })));
}
