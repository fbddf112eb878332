// Bundles www/tracing.mjs with the OpenTelemetry SDK and exporter (tools/node_modules) and the package's
// `idempotent-fetch-client/otel` (pkg/otel.js, built first) into www/tracing.js, the one module the demo
// page imports for tracing. `cargo xtask demo` and the test steps run it when tracing.js is older than
// its inputs (xtask/src/project.rs).
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const tools = process.env.IF_TOOLS_DIR ?? path.join(root, "tools");
const pkg = process.env.IF_PKG ?? path.join(root, "pkg");
const esbuild = createRequire(path.join(tools, "package.json"))("esbuild");

await esbuild.build({
  entryPoints: [path.join(root, "www/tracing.mjs")], bundle: true, format: "esm", platform: "browser", target: "es2020",
  outfile: path.join(root, "www/tracing.js"), logLevel: "warning", nodePaths: [path.join(tools, "node_modules")],
  alias: { "idempotent-fetch-client/otel": path.join(pkg, "otel.js") }, minify: true,
});
