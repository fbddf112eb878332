// Runs every case of cases.mjs in Node (memory storage) against the built package pkg/node.
// Build it first: cargo xtask build
// Browser-only cases (real Web Storage) are reported as skipped here and run in browser.test.mjs.
import { test, before, after } from "node:test";

import { loadPkgNode } from "../support/paths.mjs";
import { startTestServer } from "../support/test-server.mjs";
import { cases, makeContext, runCase } from "./cases.mjs";

const lib = loadPkgNode();

let server;
before(async () => {
  server = await startTestServer();
});
after(async () => {
  await server?.close();
});

for (const testCase of cases) {
  test(testCase.name, { skip: testCase.browserOnly ? "browser only (runs in browser.test.mjs)" : false, timeout: 20_000 }, async () => {
    await runCase(testCase, makeContext({ lib, server: server.url, storage: "memory", browser: false }));
  });
}
