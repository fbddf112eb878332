// The package in a process where @opentelemetry/api cannot be found (as in an app that never installed it):
// two keyed requests on an in-memory PGlite. Prints whether the package asked for the API and the outcomes.
import Module, { createRequire } from "node:module";

let asked = false;
const resolve = Module._resolveFilename;
Module._resolveFilename = function (request, ...rest) {
  if (request === "@opentelemetry/api") {
    asked = true;
    throw Object.assign(new Error(`Cannot find module '${request}'`), { code: "MODULE_NOT_FOUND" });
  }
  return resolve.call(this, request, ...rest);
};

const require = createRequire(import.meta.url);
const { PGlite } = require("@electric-sql/pglite");
const { idempotentEndpoint } = require("idempotent-endpoint");

const endpoint = idempotentEndpoint({ database: new PGlite() });
await endpoint.install();
const request = { method: "POST", path: "/api/orders", keyHeader: ["no-otel-key"], body: new TextEncoder().encode("{}"), headers: {} };
const outcomes = [];
for (let i = 0; i < 2; i += 1) outcomes.push((await endpoint.run(request, async () => ({ status: 201, body: {} }))).outcome);
process.stdout.write(JSON.stringify({ asked, outcomes }));
