// The OpenTelemetry side of the tracing tests' pages (tests/js/otel-browser.test.mjs,
// tests/js/otel-background.test.mjs): tests/browser/otel-harness.mjs bundled with the package's
// idempotent-fetch-client/otel (pkg/otel.js) and the SDK from the tools' node_modules, as an app's
// bundler would, into one ES module a page or a module service worker imports.
import { mkdtempSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";

import { pkgDir, root } from "./paths.mjs";

const TOOLS = process.env.IF_TOOLS_DIR ?? path.join(root, "tools");

/** Writes the harness bundle to `outfile`. */
export async function bundleOtelHarness(outfile) {
  const esbuild = createRequire(path.join(TOOLS, "package.json"))("esbuild");
  await esbuild.build({
    entryPoints: [path.join(root, "tests/browser/otel-harness.mjs")], bundle: true, format: "esm", platform: "browser", target: "es2020",
    outfile, logLevel: "warning", nodePaths: [path.join(TOOLS, "node_modules")],
    alias: { "idempotent-fetch-client/otel": path.join(pkgDir, "otel.js") },
  });
}

/**
 * A directory of its own with the harness bundle and a page, `file`, that loads the package's development
 * build from /pkg/ and the harness (window.__lib, __ready or __initError, as tests/support/page.mjs does
 * for the pages served from the repository). Returns the directory.
 */
export async function writeOtelPage(file, title) {
  const dir = mkdtempSync(path.join(os.tmpdir(), "if-otel-page-"));
  await bundleOtelHarness(path.join(dir, "otel-harness.js"));
  writeFileSync(path.join(dir, file), `<!doctype html>
<meta charset="utf-8">
<title>${title}</title>
<script type="module">
  import * as lib from "/pkg/index.development.js";
  import "/otel-harness.js";
  try {
    await lib.ready;
    window.__lib = lib;
    window.__ready = true;
  } catch (error) {
    window.__initError = String(error?.stack ?? error);
  }
</script>
`);
  return dir;
}

/** The intent span's name (src/js/otel.ts INTENT_SPAN_NAME) and SpanKind.CLIENT, as the spans read back. */
export const INTENT_SPAN_NAME = "idempotent-fetch intent";
export const SPAN_KIND_CLIENT = 2;
/** A sampled W3C traceparent: its trace id and parent id. */
export const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-01$/;
