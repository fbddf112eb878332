// Runs every case of cases.mjs in Node (memory storage) against the built package (pkg/), loaded as
// Node's `import` loads it (package.json exports: "node" + "import"). Build it: cargo xtask build
// Browser-only cases (real Web Storage) are reported as skipped here and run in browser.test.mjs.
import { test, before, after } from "node:test";

import { importPackage } from "../support/paths.mjs";
import { startTestServer } from "../support/test-server.mjs";
import { cases, makeContext, runCase } from "./cases.mjs";

const lib = await importPackage();

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
