#!/usr/bin/env node
// Start-up alone (issue 12's bar), in headless Chromium, against reference modules, on fresh loads that
// alternate between the variants (each going first in turn) so that the machine's load falls on all alike.
//
//   node benches/startup.mjs                  pkg/ and the references, 20 loads each
//   --loads N                                 loads per variant (--quick: 5)
//   --pkg [NAME=]DIR                          a package directory to time (repeatable; default pkg/): e.g.
//                                             an older build next to the current one
//   --no-cdp                                  no debugger attached: Chromium opens the page by itself and
//                                             each page reports to the server, then navigates to the next
//
// Each load times, in the page, `import()` of the entry, `await ready` and
// `new IdempotentClient({storage: "memory"})`, as benches/overhead.mjs does (same server headers:
// cross-origin isolated, `cache-control: no-store`). The references show what any package pays here:
// an empty module; 40 KB of small functions, one export (pkg/index.js's size: the cost of parsing that much);
// the same plus fetching and compiling the package's own .wasm from a microtask (what a wasm package
// of this size pays at least before any of its own code runs).
//
// Why --no-cdp: with a CDP client attached (Playwright, DevTools), Chromium records the JavaScript stack
// of every request, and V8 re-parses a function on that stack to find its source positions; the
// constructor's first calls also compile slower. Users without DevTools open do not pay that.
//
// Needs tools/node_modules (playwright-core) and Chromium at CHROMIUM_PATH. Prints figures; never fails on them.

import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync, copyFileSync } from "node:fs";
import { createServer } from "node:http";
import os from "node:os";
import { basename, dirname, extname, join, normalize, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import { CHROMIUM_ARGS, chromiumPath, launchChromium } from "../tests/support/chromium.mjs";

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const argv = process.argv.slice(2);
const option = (name) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : undefined);
const LOADS = Number(option("--loads") ?? (argv.includes("--quick") ? 5 : 20));
const noCdp = argv.includes("--no-cdp");
const pkgs = argv.flatMap((a, i) => (argv[i - 1] === "--pkg" ? [a] : []));
const variants = (pkgs.length ? pkgs : [join(root, "pkg")]).map((spec) => {
  const [name, dir] = spec.includes("=") ? spec.split("=") : [basename(resolve(spec)), spec];
  return { name, dir: resolve(dir) };
});
const wasmFile = join(variants[0].dir, "idempotent_fetch_bg.wasm");
if (!existsSync(wasmFile)) throw new Error(`${wasmFile} is missing: build the package (node package/build.mjs)`);

// ---- the reference modules ------------------------------------------------------------------------
const refs = mkdtempSync(join(os.tmpdir(), "if-startup-"));
const entrySize = readFileSync(join(variants[0].dir, "index.js")).length;
let functions = "";
for (let i = 0; functions.length < entrySize; i++) {
  functions += `function f${i}(a,b){const c=a*${i}+b;return c>${i}?[c,"s${i}"]:{a,b,k:"v${i}"}}\n`;
}
functions += "export const loaded = true;\n"; // one export, as the package has few: the rest is parsing
const reference = (name, text) => {
  mkdirSync(join(refs, name));
  writeFileSync(join(refs, name, "index.js"), text);
  copyFileSync(wasmFile, join(refs, name, "idempotent_fetch_bg.wasm"));
  variants.push({ name, dir: join(refs, name) });
};
reference("empty module", "export const empty = true;\n");
reference(`${(entrySize / 1024).toFixed(0)} KB of functions`, functions);
reference(
  `${(entrySize / 1024).toFixed(0)} KB of functions + fetch and compile the .wasm`,
  `${functions}export const ready = Promise.resolve().then(() => WebAssembly.compileStreaming(fetch(new URL("./idempotent_fetch_bg.wasm", import.meta.url))));\n`,
);
variants.forEach((v, i) => (v.path = `/v${i}/`));

// The loads, in order: round i starts with variant i mod n.
const order = [];
for (let i = 0; i < LOADS; i++) for (let k = 0; k < variants.length; k++) order.push(variants[(k + i) % variants.length]);
const samples = new Map(variants.map((v) => [v, []]));

// In the page: the same steps as benches/overhead.mjs's startup(); a reference has no ready or client.
async function startup(src) {
  const t0 = performance.now();
  const mod = await import(src);
  const t1 = performance.now();
  await mod.ready;
  const t2 = performance.now();
  if (mod.IdempotentClient) new mod.IdempotentClient({ namespace: `startup-${Math.random()}`, storage: "memory" });
  const t3 = performance.now();
  return [t1 - t0, t2 - t1, t3 - t2, t3 - t0];
}

// ---- the loopback server ----------------------------------------------------------------------------
const HEADERS = { "cross-origin-opener-policy": "same-origin", "cross-origin-embedder-policy": "require-corp", "cache-control": "no-store" };
const TYPES = { ".js": "text/javascript", ".wasm": "application/wasm", ".html": "text/html" };
let allReported;
const reported = new Promise((resolveAll) => (allReported = resolveAll));
// --no-cdp: page i runs load i, posts its figures, then goes to page i + 1.
const selfDrivenPage = (i) =>
  `<!doctype html><meta charset="utf-8"><body><script type="module">
const figures = await (${startup})(${JSON.stringify(`${order[i].path}index.js`)});
await fetch("/report/${i}", { method: "POST", body: JSON.stringify(figures) });
location.href = "/page/${i + 1}";
</script>`;
const server = createServer((req, res) => {
  const url = new URL(req.url, "http://x");
  const html = (text) => res.writeHead(200, { ...HEADERS, "content-type": "text/html" }).end(text);
  let m;
  if (url.pathname === "/") return html("<!doctype html><title>startup</title>");
  if ((m = url.pathname.match(/^\/page\/(\d+)$/))) return html(+m[1] < order.length ? selfDrivenPage(+m[1]) : "done");
  if ((m = url.pathname.match(/^\/report\/(\d+)$/)) && req.method === "POST") {
    let body = "";
    req.on("data", (chunk) => (body += chunk));
    req.on("end", () => {
      samples.get(order[+m[1]]).push(JSON.parse(body));
      res.writeHead(204).end();
      if (+m[1] === order.length - 1) allReported();
    });
    return;
  }
  const variant = variants.find((v) => url.pathname.startsWith(v.path));
  const file = variant && normalize(join(variant.dir, url.pathname.slice(variant.path.length)));
  if (!file || !file.startsWith(variant.dir + "/") || !existsSync(file)) return res.writeHead(404).end();
  res.writeHead(200, { ...HEADERS, "content-type": TYPES[extname(file)] ?? "application/octet-stream" }).end(readFileSync(file));
});
await new Promise((listening) => server.listen(0, "127.0.0.1", listening));
const origin = `http://127.0.0.1:${server.address().port}`;

let version = "";
try {
  if (noCdp) {
    const profile = join(refs, "profile");
    // A debugging port nobody connects to keeps headless Chromium open on the page.
    const chromium = spawn(chromiumPath(), [...CHROMIUM_ARGS, `--user-data-dir=${profile}`, "--remote-debugging-port=0", `${origin}/page/0`], { stdio: "ignore" });
    const exited = new Promise((done) => chromium.once("exit", done));
    try {
      await reported;
    } finally {
      chromium.kill();
      await exited; // before its profile directory is removed
    }
  } else {
    const browser = await launchChromium({ what: "the start-up benchmark" });
    version = ` ${browser.version()}`;
    const context = await browser.newContext();
    for (const variant of order) {
      const page = await context.newPage();
      await page.goto(`${origin}/`);
      samples.get(variant).push(await page.evaluate(startup, `${variant.path}index.js`));
      await page.close();
    }
    await browser.close();
  }
} finally {
  server.close();
  // Chromium's helper processes may still be writing to the profile for a moment after it exits.
  rmSync(refs, { recursive: true, force: true, maxRetries: 20, retryDelay: 100 });
}

// ---- the figures ------------------------------------------------------------------------------------
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
};
const ms = (x) => x.toFixed(1);
console.log(
  `# Start-up in headless Chromium${version}, ${noCdp ? "no debugger attached (--no-cdp)" : "driven by playwright-core (CDP attached)"}\n\n` +
    `${LOADS} fresh loads per variant, alternating; load average at the end ${os.loadavg().map((l) => l.toFixed(1)).join(", ")}.\n`,
);
console.log("| variant | import() | await ready | new IdempotentClient | total: median | min | max |");
console.log("|---|---:|---:|---:|---:|---:|---:|");
for (const [variant, xs] of samples) {
  const col = (k) => ms(median(xs.map((x) => x[k])));
  const totals = xs.map((x) => x[3]);
  console.log(`| ${variant.name} | ${col(0)} | ${col(1)} | ${col(2)} | **${col(3)}** | ${ms(Math.min(...totals))} | ${ms(Math.max(...totals))} |`);
}
