// Scripted HTTP test server for the JavaScript API tests (Node and headless Chromium).
//
// Every request to /s/<scenario>?script=STEPS is answered by the next step of STEPS (comma
// separated; the last step repeats), and logged so a test can check what the client sent:
//   201        answer with that status (any 100..599), JSON body {attempt, key}
//   429~2      ... with `Retry-After: 2`; `503~Wed, 21 Oct 2015 07:28:00 GMT` for a date
//   201r       ... with `Idempotent-Replayed: true` (201q: `Idempotency-Replayed: true`, 201x: `X-Replayed: true`,
//              201p: `X-Idempotent-Replayed: true`, 201f: `Idempotent-Replayed: false`)
//   503s       ... with `Stripe-Should-Retry: false` (400t: `Stripe-Should-Retry: true`)
//   409d       ... with the first attempt's body and no marker: django-idempotency-key's replay of the
//              answer it stored (its default status for a replay is 409)
//   delay300   wait 300 ms, then answer 201
//   reset      destroy the connection without answering
//   endless    200 with a body that never ends
//   slowbody300  201 whose headers come at once and whose body comes 300 ms later
// GET /ks/<scenario>/<key>?script=STEPS answers the key-status protocol (README, "Your server") with the
// next step: doneNNN (the stored answer: NNN {stored: true, key}; doneNNNr and doneNNNx: its headers name a replay marker), inflight (Retry-After: 1),
// unknown, and answers that are not of the protocol: garbage (not JSON), html, 500, otherkey (a "done"
// about another key), noresponse (a "done" without its response). Logged under "<scenario>-ks".
// GET /log/<scenario> returns the logged requests: [{method, key, headers, body, bodyBase64, attempt, at}]
// (`body` is latin1 text; `bodyBase64` is the exact bytes; `at` is Date.now() when it arrived).
// `&close=1` on a scenario URL answers with `Connection: close`, so every attempt uses a fresh
// connection (Chromium transparently re-sends a request that got a 408 or a reset on a reused
// keep-alive socket, which would hide that attempt from the library).
// CORS: a preflight's Access-Control-Request-Headers are echoed back, because the `*` wildcard
// does not cover `Authorization` (tests send one to prove it never reaches storage). `&expose=0`
// answers without Access-Control-Expose-Headers, `&expose=a,b` exposes only those; `&allow=0` answers preflights without allowing
// any request header (so a request with the key header is refused before it is sent).
// Run directly it prints `listening on http://127.0.0.1:PORT`; tests import `startTestServer`, which
// resolves to { url, log(scenario) (the GET /log/<scenario> array), close() }.
import http from "node:http";

export function startTestServer(port = 0) {
  const logs = new Map();
  const server = http.createServer(async (req, res) => {
    const cors = {
      "access-control-allow-origin": "*",
      "access-control-allow-headers": "*",
      "access-control-allow-methods": "GET,POST,PUT,PATCH,DELETE",
      "access-control-expose-headers": "idempotent-replayed, idempotency-replayed, x-replayed, x-idempotent-replayed, retry-after, stripe-should-retry",
    };
    const url = new URL(req.url, "http://127.0.0.1");
    if (url.searchParams.has("close")) cors.connection = "close";
    const expose = url.searchParams.get("expose");
    if (expose === "0") delete cors["access-control-expose-headers"];
    else if (expose) cors["access-control-expose-headers"] = expose;
    if (req.method === "OPTIONS") {
      const asked = req.headers["access-control-request-headers"];
      if (url.searchParams.get("allow") === "0") delete cors["access-control-allow-headers"];
      else if (asked) cors["access-control-allow-headers"] = asked;
      res.writeHead(204, cors).end();
      return;
    }
    const [, kind, scenario] = url.pathname.split("/");
    if (kind === "log" && scenario) {
      res.writeHead(200, { ...cors, "content-type": "application/json" });
      res.end(JSON.stringify(logs.get(scenario) ?? []));
      return;
    }
    if (kind === "ks" && scenario) {
      const key = decodeURIComponent(url.pathname.split("/")[3] ?? "");
      const log = logs.get(`${scenario}-ks`) ?? [];
      logs.set(`${scenario}-ks`, log);
      log.push({ method: req.method, key, headers: req.headers, at: Date.now() });
      const steps = (url.searchParams.get("script") ?? "unknown").split(",");
      keyStatus(steps[Math.min(log.length - 1, steps.length - 1)], key, res, cors);
      return;
    }
    if (kind !== "s" || !scenario) {
      res.writeHead(404, cors).end();
      return;
    }
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const log = logs.get(scenario) ?? [];
    logs.set(scenario, log);
    const attempt = log.length + 1;
    const key = req.headers["idempotency-key"] ?? null;
    const body = Buffer.concat(chunks);
    log.push({ method: req.method, key, headers: req.headers, body: body.toString("latin1"), bodyBase64: body.toString("base64"), attempt, at: Date.now() });
    const steps = (url.searchParams.get("script") ?? "201").split(",");
    const step = steps[Math.min(attempt - 1, steps.length - 1)];
    await answer(step, res, cors, { attempt, key });
  });
  return new Promise((resolve) => {
    server.listen(port, "127.0.0.1", () => {
      const { port: bound } = server.address();
      resolve({
        url: `http://127.0.0.1:${bound}`,
        log: async (scenario) => (await fetch(`http://127.0.0.1:${bound}/log/${scenario}`)).json(),
        close: () => new Promise((done) => { server.closeAllConnections?.(); server.close(() => done()); }),
      });
    });
  });
}

function keyStatus(step, key, res, cors) {
  const json = (body, extra = {}) => res.writeHead(200, { ...cors, "content-type": "application/json", ...extra }).end(JSON.stringify(body));
  const stored = (status, headers = {}) => ({ status, headers: { "content-type": "application/json", ...headers }, body: JSON.stringify({ stored: true, key }) });
  // doneNNN: the stored answer NNN; with r or x, its account names the marker a replay carries
  // (Idempotent-Replayed or X-Replayed), as the reference server's does.
  const done = /^done(\d{3})([rx])?$/.exec(step);
  if (done) json({ status: "done", response: stored(Number(done[1]), { r: { "idempotent-replayed": "true" }, x: { "x-replayed": "true" } }[done[2]] ?? {}) });
  else if (step === "inflight") json({ status: "in_flight" }, { "retry-after": "1" });
  else if (step === "unknown") json({ status: "unknown" });
  else if (step === "garbage") res.writeHead(200, { ...cors, "content-type": "application/json" }).end("{not json");
  else if (step === "html") res.writeHead(200, { ...cors, "content-type": "text/html" }).end("<html><body>Sign in</body></html>");
  else if (step === "otherkey") json({ status: "done", key: "00000000-0000-4000-8000-000000000000", response: stored(201) });
  else if (step === "noresponse") json({ status: "done" });
  else res.writeHead(500, cors).end("oops");
}

async function answer(step, res, cors, info) {
  if (step === "reset") {
    res.socket.destroy();
    return;
  }
  if (step.startsWith("delay")) {
    await new Promise((r) => setTimeout(r, Number(step.slice(5))));
    if (res.socket.destroyed) return;
    step = "201";
  }
  if (step.startsWith("slowbody")) {
    res.writeHead(201, { ...cors, "content-type": "application/json" });
    res.flushHeaders();
    await new Promise((r) => setTimeout(r, Number(step.slice(8))));
    if (!res.socket || res.socket.destroyed) return;
    res.end(JSON.stringify(info));
    return;
  }
  if (step === "endless") {
    res.writeHead(200, { ...cors, "content-type": "text/plain" });
    const timer = setInterval(() => res.write("x".repeat(1024)), 10);
    res.on("close", () => clearInterval(timer));
    return;
  }
  const match = /^(\d{3})(r|q|x|p|f|s|t|d)?(?:~(.*))?$/.exec(step);
  if (!match) {
    res.writeHead(500, cors).end("bad script step " + step);
    return;
  }
  const [, status, flag, retryAfter] = match;
  const headers = { ...cors, "content-type": "application/json" };
  if (retryAfter !== undefined) headers["retry-after"] = retryAfter;
  if (flag === "r") headers["idempotent-replayed"] = "true";
  if (flag === "q") headers["idempotency-replayed"] = "true";
  if (flag === "x") headers["x-replayed"] = "true";
  if (flag === "p") headers["x-idempotent-replayed"] = "true";
  if (flag === "f") headers["idempotent-replayed"] = "false";
  if (flag === "s") headers["stripe-should-retry"] = "false";
  if (flag === "t") headers["stripe-should-retry"] = "true";
  res.writeHead(Number(status), headers);
  res.end(JSON.stringify(flag === "d" ? { ...info, attempt: 1 } : info));
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { url } = await startTestServer(Number(process.env.PORT ?? 0));
  console.log(`listening on ${url}`);
}
