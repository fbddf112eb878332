// Builds the one npm package, pkg/, from the Rust machine (src/) and the TypeScript driver (src/js/).
// Every command line of the package build is written here, once; `cargo xtask` calls this script
// (xtask/src: build_package), so do the tests and the benches.
//
//   node package/build.mjs            the whole package into pkg/ (each step prints what it runs)
//
// Steps (package/README.md says what ships and why):
//   1. cargo rustc --release --target wasm32-unknown-unknown --no-default-features -p idempotent-fetch --lib --crate-type cdylib
//      (plain exports, src/wasm/abi.rs; the glue is the driver's own src/js/abi.ts, no generated code)
//   2. wasm-opt with the flags of Cargo.toml [package.metadata.wasm-pack.profile.release] wasm-opt, then
//      wasm-metadce (dropUnusedExports: the exports the glue never calls), then
//      wasm-opt MINIFY_NAMES (short import/export names; the glue is renamed to match when bundled)
//      -> pkg/idempotent_fetch_bg.wasm, and the renames -> WASM_NAMES_FILE (beside pkg/, for the glue's test)
//   3. esbuild (the glue with the wasm's source and names: `glueFor`), for each build (BUILDS: production, and
//      development as *.development.js; DEFINES): src/js/index.ts -> pkg/index.js (browsers, workers, bundlers: minified ESM + source map that loads the wasm
//      with `new URL("./idempotent_fetch_bg.wasm", import.meta.url)`) and pkg/node.cjs (Node: reads the
//      wasm from disk and instantiates it on load), plus pkg/node.js, the ESM face of node.cjs (one instance for import and require)
//      and the side entries (SIDE_ENTRIES), each as .js + .cjs with source maps: watch.ts (the intent
//      store), react.ts / vue.ts / svelte.ts (the bindings, over the store; the framework external),
//      node/file-storage.ts (`idempotent-fetch-client/file`, Node); and the command line check/cli.ts ->
//      pkg/bin/check.mjs (`npx idempotent-fetch-client check <url>`, Node; no page entry imports it)
//   4. tsc --emitDeclarationOnly -> pkg/types/ (the driver's own .d.ts; no hand-written types)
//   5. package.json (fields from Cargo.toml), package/npm-README.md as README.md, LICENSE-* next to them
import { spawnSync } from "node:child_process";
import { chmodSync, copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const tools = path.join(root, "tools");
const toolsBin = path.join(tools, "node_modules/.bin");

/** The package's file names: the tests, the benches and the xtask size step read them from here. */
export const PKG_DIR = path.join(root, "pkg");
export const WASM_FILE = "idempotent_fetch_bg.wasm";
export const BROWSER_ENTRY = "index.js";
/** The same entry with the lazy parts bundled in (`idempotent-fetch-client/worker`): for service workers. */
export const WORKER_ENTRY = "worker.js";
const CRATE = "idempotent-fetch";
const DRIVER_DIR = path.join(root, "src/js");
/** The glue: the driver's side of the module's exports (src/wasm/abi.rs). */
const GLUE = path.join(DRIVER_DIR, "abi.ts");
/** The README the package ships (npm shows it). */
export const NPM_README = path.join(root, "package/npm-README.md");

/** Runs a command from the repository root, printing it; throws on a non-zero exit. */
function run(command, args, { capture = false } = {}) {
  console.error(`$ ${[command, ...args].map((a) => (/[\s"']/.test(a) ? JSON.stringify(a) : a)).join(" ")}`);
  const env = { ...process.env, PATH: [toolsBin, process.env.PATH, path.join(os.homedir(), ".cargo/bin")].join(path.delimiter) };
  const result = spawnSync(command, args, { cwd: root, env, stdio: capture ? ["ignore", "pipe", "inherit"] : "inherit", encoding: "utf8", maxBuffer: 64 << 20 });
  if (result.error) throw new Error(`${command}: ${result.error.message}`);
  if (result.status !== 0) throw new Error(`${command} exited with ${result.status}`);
  return result.stdout;
}

/** The crate as cargo sees it: target dir, version, description, license, wasm-opt flags. */
export function crateMetadata() {
  const meta = JSON.parse(run("cargo", ["metadata", "--format-version", "1", "--no-deps"], { capture: true }));
  const crate = meta.packages.find((p) => p.name === CRATE);
  if (!crate) throw new Error(`cargo metadata lists no package ${CRATE}`);
  const wasmOpt = crate.metadata?.["wasm-pack"]?.profile?.release?.["wasm-opt"];
  if (!Array.isArray(wasmOpt)) throw new Error("Cargo.toml has no [package.metadata.wasm-pack.profile.release] wasm-opt = [...]");
  const npmName = crate.metadata?.npm?.name;
  if (typeof npmName !== "string" || !npmName) throw new Error("Cargo.toml has no [package.metadata.npm] name = \"...\"");
  return { targetDir: meta.target_directory, crate, wasmOpt, npmName };
}

/** Step 1: the release wasm (plain exports, src/wasm/abi.rs). Returns its path and a scratch dir. */
function releaseWasm(meta, features) {
  const featureArgs = features.length ? ["--features", features.join(",")] : [];
  // The crate is an rlib in Cargo.toml (so the wasm-bindgen-test suites can link it without its panic
  // handler: Cargo.toml, feature `harness`); the module is linked as a cdylib here.
  run("cargo", ["rustc", "--release", "--target", "wasm32-unknown-unknown", "--no-default-features", ...featureArgs, "-p", CRATE, "--lib", "--crate-type", "cdylib"]);
  const built = path.join(meta.targetDir, "wasm32-unknown-unknown/release", `${CRATE.replaceAll("-", "_")}.wasm`);
  const out = mkdtempSync(path.join(os.tmpdir(), "if-wasm-"));
  return { rawWasm: built, tmp: out };
}

// Step 2b: the wasm's import and export names shortened to one or two letters (wasm-opt prints the
// mapping as JSON), and the glue's uses renamed to match (`renameInGlue`): the export names of
// src/wasm/abi.rs and the import module name `idempotent_fetch` become one or two letters. A separate run after the size flags, so the mapping is
// printed once. The features are those rustc's wasm32 target uses (the first run stripped the
// target-features section; `--all-features` would let wasm-opt write encodings engines reject).
const WASM_FEATURES = [
  "--enable-mutable-globals", "--enable-nontrapping-float-to-int", "--enable-bulk-memory", "--enable-bulk-memory-opt",
  "--enable-sign-ext", "--enable-reference-types", "--enable-multivalue", "--enable-call-indirect-overlong",
];
export const MINIFY_NAMES = [...WASM_FEATURES, "--minify-imports-and-exports-and-modules"];

// Step 2a: the exports the glue never calls removed, with all that only they reach (rustc's
// `__data_end` and `__heap_base` globals, which no glue reads). wasm-metadce keeps the memory and
// each export the glue names as `wasm.<export>` (its doc comments left out); one the module lacks
// fails the renaming below. `flags`: more wasm-opt flags (benches/size.mjs keeps the names with -g).
export function dropUnusedExports(input, output, flags = []) {
  const glue = withoutDocs(readFileSync(GLUE, "utf8"));
  const used = [...new Set(["memory", ...[...glue.matchAll(/\bwasm\.([A-Za-z_$][\w$]*)/g)].map((m) => m[1])])];
  const graph = [{ name: "glue", root: true, reaches: used }, ...used.map((name) => ({ name, export: name }))];
  const file = `${output}.graph.json`;
  writeFileSync(file, JSON.stringify(graph));
  try {
    run(path.join(toolsBin, "wasm-metadce"), [...WASM_FEATURES, ...flags, input, "--graph-file", file, "-o", output], { capture: true });
  } finally {
    rmSync(file, { force: true });
  }
}

/** The glue without its doc comments (they may name files such as src/wasm.rs, which the list of
 *  used exports and the renaming would read as an export). */
function withoutDocs(text) {
  return text.replace(/^[ \t]*\/\*\*[\s\S]*?\*\/\n/gm, "");
}

/** Where the build leaves the renames of the shipped .wasm (beside pkg/, not in it): the glue's
 *  round-trip test (tests/js/abi.test.mjs) bundles src/js/abi.ts with them as the package does. */
export const WASM_NAMES_FILE = `${PKG_DIR}-wasm-names.json`;

/** The renames `minifyNames` returned for the package in pkg/, as the build left them. */
export function readWasmNames() {
  const { module, imports, exports } = JSON.parse(readFileSync(WASM_NAMES_FILE, "utf8"));
  return { module, imports: new Map(imports), exports: new Map(exports) };
}

/** Shortens `input`'s import and export names into `output`; returns the renames for the glue. */
function minifyNames(input, output) {
  const printed = run(path.join(toolsBin, "wasm-opt"), [...MINIFY_NAMES, input, "-o", output], { capture: true });
  const mapping = JSON.parse(printed.slice(0, printed.indexOf("\n}") + 2));
  const imports = WebAssembly.Module.imports(new WebAssembly.Module(readFileSync(output)));
  const modules = [...new Set(imports.map((i) => i.module))];
  if (modules.length !== 1) throw new Error(`wasm-opt left ${modules.length} import modules (${modules.join(", ")}); the glue has one`);
  return {
    module: modules[0],
    imports: new Map(mapping.imports.map(([, from, to]) => [from, to])),
    exports: new Map(mapping.exports),
  };
}

/** The glue with the wasm's names as `minifyNames` left them: each `wasm.<export>`, each import
 *  method's name (`  name(` at the start of a line) and the import module. A name the mapping does
 *  not know fails the build. */
function renameInGlue(text, names, file) {
  text = text.replace(/\bwasm\.([A-Za-z_$][\w$]*)/g, (_, name) => {
    const to = names.exports.get(name);
    if (to === undefined) throw new Error(`${file}: the glue uses wasm.${name}, which the minified wasm does not export`);
    return `wasm.${to}`;
  });
  for (const [from, to] of names.imports) {
    const key = new RegExp(`^( +)${from}\\(`, "m");
    if (!key.test(text)) throw new Error(`${file}: no import ${from} in the glue`);
    text = text.replace(key, (_, indent) => `${indent}${to}(`);
  }
  const moduleKey = /^( +)idempotent_fetch: \{/m;
  if (!moduleKey.test(text)) throw new Error(`${file}: expected the import object idempotent_fetch: {`);
  return text.replace(moduleKey, (_, indent) => `${indent}${JSON.stringify(names.module)}: {`);
}

// The glue's request for the wasm, i.e. what `init()` with no argument loads. The driver calls it
// so; each bundle puts its own source there (a Response for browsers, the bytes for Node). Checked,
// so a glue without the line fails the build instead of shipping a package that cannot find its wasm.
const GLUE_DEFAULT_WASM = /fetch\(new URL\("idempotent_fetch_bg\.wasm", import\.meta\.url\)\)/g;
const WASM_SOURCE = {
  // The request started by WASM_REQUEST below, taken once; a retry after a failure fetches anew.
  browser: "[wasmRequest || fetch(wasmUrl), wasmRequest = 0][0]",
  // Node: the bytes, read next to node.cjs (fetch() cannot read file: URLs in Node).
  node: `require("node:fs").readFileSync(require("node:path").join(__dirname, "${WASM_FILE}"))`,
};
// Browsers: the .wasm is requested by the first statement of the bundle (the glue comes first), while
// the rest of the module has still to run, instead of by `ready` after the module ran: the download
// and the streaming compile overlap the driver's evaluation and the page's own modules (BENCHMARKS.md,
// section 3b). The URL is relative with "./": Vite and webpack 5 emit the file as an asset and
// rewrite the URL, unaided.
const WASM_REQUEST = {
  browser: `const wasmUrl = new URL("./${WASM_FILE}", import.meta.url);\nlet wasmRequest = fetch(wasmUrl);\n`,
  node: "",
};
// Node may compile and instantiate synchronously (browsers refuse that for modules over 4 KB on the
// main thread), so there the glue instantiates when it is loaded: `require` returns a ready module and
// the driver's init() finds the instance already there. Browsers load asynchronously (`ready`).
const LOAD_AT_IMPORT = { browser: "", node: `\ninitSync(${WASM_SOURCE.node});\n` };

/** The glue as bundled for `platform`: src/js/abi.ts with the wasm's source and its minified names
 *  (the bundler's minifier does the rest). */
function glueFor(file, platform, names) {
  const text = withoutDocs(readFileSync(file, "utf8"));
  const found = text.match(GLUE_DEFAULT_WASM)?.length ?? 0;
  if (found !== 1) throw new Error(`${file}: expected one \`fetch(new URL("${WASM_FILE}", import.meta.url))\`, found ${found}`);
  return WASM_REQUEST[platform] + renameInGlue(text, names, file).replace(GLUE_DEFAULT_WASM, WASM_SOURCE[platform]) + LOAD_AT_IMPORT[platform];
}

/** The esbuild plugin that gives the glue (src/js/abi.ts) the wasm's source for `platform` and its
 *  minified names. */
export function wasmSourcePlugin(platform, names) {
  return {
    name: "idempotent-fetch-wasm-source",
    setup(build) {
      build.onLoad({ filter: /[\\/]src[\\/]js[\\/]abi\.ts$/ }, (args) => ({ contents: glueFor(args.path, platform, names), loader: "ts" }));
    },
  };
}

/** Members of the glue's classes that only the glue reads (marked `@internal` in src/js/abi.ts). */
const GLUE_PRIVATE = ["wasmHandle", "takeHandle"];
/** Private members of the driver (src/js) with names found nowhere else: renamed in the bundle. */
const DRIVER_PRIVATE = [
  "engineReady", "engineMade", "beginPrepared", "sendLocked", "adoptLock", "offered", "inFlight",
  "inMemory", "fallBack", "onFallback", "byType", "forgetSecret", "core", "view", "listeners", "config",
  "sentNow", "unsaved", "retire", "persisted", "waiting", "records", "prefix", "area", "backend", "requested",
  "database", "fallbackReason", "machine", "typed", "shelves", "freed", "swept", "deleteWhenAnswered", "deleteIf", "integer",
  "store", "engine", "known", "scanned", "claims", "stamp", "cap", "retired", "secret", "sent", "opened",
  "retryAfterFreeing", "wasResumed", "deferSave", "sendNow", "reconciler", "corsWarned", "madeAt", "onFull", "queue", "share", "timer", "prepared",
  // The members of `Fields` (fields.ts).
  "only", "oneOf", "string", "boolean", "fail", "path", "object",
  // The machine's methods the driver calls (abi.ts `Machine`).
  "markSaved", "onResponse", "onKeyStatus",
  // The cross-origin tally (cors.ts `CorsTally`) and the key status left open (send.ts `KeyStatusOpen`).
  "refused", "last", "repeatedBlind", "detail",
  // The functions the entry hands the resume part (resume.ts `ResumeKit`).
  "loadRecord", "viewOf", "intentIdArg", "notFound", "corruptRecord", "storageUnavailable", "prepareParts", "pageLocation",
  "hashOf", "operationOf", "fieldsOf", "storedBody",
  // The functions the entry hands the sweep part (sweep.ts `SweepKit`).
  "decodeRecord", "retiredStamp", "discardIntent", "saveRecord", "storedEntries", "claimsDb", "dropClaimsOf", "whenIdle",
];

/** The two builds of the core for browsers (src/js/mode.ts): the production build, what apps get by
 *  default, defines `__DEV__` false, so every text written `__DEV__ && "..."` is dropped; the
 *  development build (the bundlers' `development` condition) keeps them. Node (node.cjs) and the side
 *  entries are built once, as the development build.
 *  Each has its entry, its lazy parts and its worker entry; `.development.js` names the second. */
export const BUILDS = ["production", "development"];
/** A browser file of build `flavour`: `index.js` -> `index.development.js` for the development build. */
export const fileOf = (file, flavour) => (flavour === "production" ? file : file.replace(/\.js$/, `.${flavour}.js`));
/** The globals of src/js/mode.ts for each build, as esbuild `define`s: every esbuild build of the
 *  driver's sources gives one of these (tests that bundle sources take the development build's). The
 *  production build's docs page is the README's error table (Cargo.toml's repository). */
export const DEFINES = {
  production: { __DEV__: "false", __DOCS__: JSON.stringify(`${readRepository()}#errors`) },
  development: { __DEV__: "true", __DOCS__: JSON.stringify("") },
};

/** Cargo.toml's `repository` (read directly: the defines are needed where `cargo metadata` is not run). */
function readRepository() {
  const found = readFileSync(path.join(root, "Cargo.toml"), "utf8").match(/^repository = "([^"]+)"$/m);
  if (!found) throw new Error("Cargo.toml has no repository = \"...\"");
  return found[1];
}

/** Step 3: the bundles. Returns the names the entry exports (for node.js, the ESM face of node.cjs). */
async function bundles(entry, out, names) {
  const esbuild = createRequire(path.join(tools, "package.json"))("esbuild");
  // mangleProps: the glue's internal members (the handle and its take), and the driver's private members whose names nothing else uses (no option, public API,
  // platform or stored-record name: esbuild renames every property of that name in the bundle).
  // Public API names, the wasm's export names and platform properties never match.
  const common = {
    entryPoints: [entry], bundle: true, target: "es2020", legalComments: "none", logLevel: "warning", metafile: true,
    mangleProps: new RegExp(`^(${[...GLUE_PRIVATE, ...DRIVER_PRIVATE].join("|")})$`),
  };
  let exports;
  for (const flavour of BUILDS) {
    const mode = { ...common, define: DEFINES[flavour] };
    // Minified (with a source map holding the TypeScript sources): a page without a bundler downloads
    // this file as it is, and an app's bundler gets nothing more to remove.
    const browser = await esbuild.build({
      ...mode, platform: "browser", format: "esm", minify: true, sourcemap: true, sourcesContent: true,
      outfile: path.join(out, fileOf(BROWSER_ENTRY, flavour)), plugins: [wasmSourcePlugin("browser", names), lazyImportsPlugin(flavour)],
      mangleCache: {},
    });
    await lazyParts(esbuild, out, { ...mode, mangleCache: browser.mangleCache }, flavour);
    // Service workers may not `import()` (HTML forbids it there): their entry holds every part.
    const worker = await esbuild.build({
      ...mode, platform: "browser", format: "esm", minify: true, sourcemap: true, sourcesContent: true,
      outfile: path.join(out, fileOf(WORKER_ENTRY, flavour)), plugins: [wasmSourcePlugin("browser", names)], write: false,
    });
    for (const file of worker.outputFiles) {
      if (file.path.endsWith(".js") && /\bimport\(/.test(file.text)) throw new Error(`${fileOf(WORKER_ENTRY, flavour)} has an import(): a service worker cannot run it`);
      writeFileSync(file.path, file.contents);
    }
    const pageInputs = Object.keys(browser.metafile.inputs).filter((input) => path.resolve(root, input).startsWith(CHECK_DIR));
    if (pageInputs.length) throw new Error(`${BROWSER_ENTRY} bundles ${pageInputs.join(", ")}: the check command is never part of a page's bundle`);
    exports = Object.values(browser.metafile.outputs).flatMap((o) => o.exports ?? []);
  }
  // Node: the development build (full messages; a server downloads nothing, and Node resolves
  // neither condition unless told).
  await esbuild.build({
    ...common, define: DEFINES.development, platform: "node", target: "node18", format: "cjs", outfile: path.join(out, "node.cjs"), plugins: [wasmSourcePlugin("node", names)],
  });
  await sideEntries(esbuild, out);
  await checkCommand(esbuild, out);
  if (exports.includes("default")) throw new Error("the driver has a default export; the package API is named exports only");
  return exports.sort();
}

/** Parts of the driver a page loads when it first uses them (a dynamic `import()` in lazy.ts, the
 *  only module that has one): in the browser build each is its own file under pkg/lazy/, so a page
 *  that never uses the feature never downloads it; node.cjs bundles them inline. A part shares no
 *  module state with the entry: the error class it throws is the entry's (imported from ../index.js,
 *  so `instanceof` holds), and besides its own sources it may bundle only PURE_SOURCES (constants and
 *  functions without state, copied into the part). */
export const LAZY_PARTS = [
  // Asking the server about a key (statusUrl / reconcile): preloaded when the option is set.
  { source: "reconcile.ts", file: "lazy/reconcile.js" },
  // A stored intent taken up again by id (resume, reconcile and settle by id).
  { source: "resume.ts", file: "lazy/resume.js" },
  // The cross-origin diagnosis: only a retried answer from another origin needs it.
  { source: "cors.ts", file: "lazy/cors.js" },
  // The key written into the body (keyIn): preloaded when the option is set.
  { source: "placement.ts", file: "lazy/placement.js" },
  // Object bodies (Blob, URLSearchParams, FormData, ReadableStream) and Request objects.
  { source: "body-objects.ts", file: "lazy/body-objects.js" },
  // The storage backends a page asks for by option (loaded with the client that asks).
  { source: "storage/indexeddb.ts", file: "lazy/indexeddb.js" },
  { source: "storage/custom.ts", file: "lazy/custom.js" },
  // The localStorage lease where a browser has no Web Locks.
  { source: "lease.ts", file: "lazy/lease.js" },
  // A persisted request as stored: its headers (never credentials), a body over 1 KiB out of line.
  { source: "stored-request.ts", file: "lazy/stored-request.js" },
  // What deletes stored records: the sweep (idle after the first send, or sweep()) and the retired bound.
  { source: "sweep.ts", file: "lazy/sweep.js" },
  // The fingerprint's plain-JS SHA-256, where there is no crypto.subtle (plain http pages): preloaded there.
  { source: "sha256.ts", file: "lazy/sha256.js" },
];
/** What a lazy part may bundle besides its own source: modules without state. */
const PURE_SOURCES = ["mode.ts", "describe.ts", "hex.ts", "body-limits.ts", "machine.ts", "generated/contract.ts", "storage/backend.ts", "storage/idb.ts", "wait.ts"];
/** The one module of the driver that imports the lazy parts. */
const LAZY_LOADER = "lazy.ts";
/** The module whose class a lazy part takes from the entry (never a copy: `instanceof` must hold). */
const ERRORS_SOURCE = "errors.ts";

/** Browser build: each dynamic import of a lazy part (from lazy.ts only) stays an `import()` of its
 *  own file next to the entry. */
function lazyImportsPlugin(flavour) {
  return {
    name: "idempotent-fetch-lazy-parts",
    setup(build) {
      build.onResolve({ filter: /.*/ }, (args) => {
        if (args.kind !== "dynamic-import") return undefined;
        const source = path.relative(DRIVER_DIR, path.resolve(args.resolveDir, args.path.replace(/\.js$/, ".ts")));
        const part = LAZY_PARTS.find((p) => p.source === source);
        const importer = path.relative(DRIVER_DIR, args.importer);
        if (!part || importer !== LAZY_LOADER) {
          return { errors: [{ text: `${importer} imports ${args.path} dynamically: only ${LAZY_LOADER} loads parts, and only those in LAZY_PARTS` }] };
        }
        return { path: `./${fileOf(part.file, flavour)}`, external: true };
      });
    },
  };
}

/** Step 3a: each lazy part as its own minified ES module (with the entry's property renames, so the
 *  objects it is handed read the same); the build fails if it bundled a stateful module. */
async function lazyParts(esbuild, out, common, flavour) {
  for (const { source, file: name } of LAZY_PARTS) {
    const file = fileOf(name, flavour);
    const entryFromPart = path.posix.relative(path.posix.dirname(file), fileOf(BROWSER_ENTRY, flavour));
    const built = await esbuild.build({
      ...common, entryPoints: [path.join(DRIVER_DIR, source)], platform: "browser", format: "esm", minify: true, sourcemap: true,
      sourcesContent: true, outfile: path.join(out, file),
      plugins: [{
        name: "idempotent-fetch-errors-from-entry",
        setup(build) {
          const errors = path.join(DRIVER_DIR, ERRORS_SOURCE);
          build.onResolve({ filter: /errors\.js$/ }, (args) =>
            path.resolve(args.resolveDir, args.path.replace(/\.js$/, ".ts")) === errors ? { path: errors, namespace: "entry-errors" } : undefined);
          // The class is the public API's (one class, so `instanceof` holds): any other import from errors.ts fails here.
          build.onLoad({ filter: /.*/, namespace: "entry-errors" }, () => ({
            contents: `export { IdempotentFetchError } from ${JSON.stringify(entryFromPart)};`,
          }));
          build.onResolve({ filter: /.*/, namespace: "entry-errors" }, (args) => ({ path: args.path, external: true }));
        },
      }],
    });
    // The entry reads a part's exports as properties of its module: a name the entry's mangling
    // renames would be read under another name.
    const mangled = Object.values(built.metafile.outputs).flatMap((o) => o.exports ?? []).filter((name) => common.mangleProps.test(name));
    if (mangled.length) throw new Error(`${file} exports ${mangled.join(", ")}, which the bundles rename (DRIVER_PRIVATE): rename the export`);
    const extra = Object.keys(built.metafile.inputs).filter((input) => !input.startsWith("entry-errors:"))
      .map((input) => path.relative(DRIVER_DIR, path.resolve(root, input)))
      .filter((input) => input !== source && !PURE_SOURCES.includes(input));
    if (extra.length) throw new Error(`${file} bundles ${extra.join(", ")}: a lazy part may bundle only ${PURE_SOURCES.join(", ")} besides itself`);
  }
}

/** The entries that hold no copy of the client (they import only types from the driver): each
 *  subpath, its source, its ESM and CommonJS files in pkg/, and how esbuild builds it. The framework
 *  bindings bundle the intent store (watch.ts) and leave the framework to the app. */
const SIDE_ENTRIES = [
  { subpath: "./watch", source: "watch.ts", files: ["watch.js", "watch.cjs"], build: { platform: "neutral" } },
  { subpath: "./react", source: "react.ts", files: ["react.js", "react.cjs"], build: { platform: "neutral", external: ["react"] } },
  { subpath: "./vue", source: "vue.ts", files: ["vue.js", "vue.cjs"], build: { platform: "neutral", external: ["vue"] } },
  { subpath: "./svelte", source: "svelte.ts", files: ["svelte.js", "svelte.cjs"], build: { platform: "neutral" } },
  { subpath: "./tanstack", source: "tanstack.ts", files: ["tanstack.js", "tanstack.cjs"], build: { platform: "neutral" } },
  // RFC 8785 is the `canonicalize` package's (the app's, an optional peer dependency); the hash is the
  // driver's plain SHA-256.
  { subpath: "./agent", source: "agent.ts", files: ["agent.js", "agent.cjs"], shares: ["sha256.ts", "hex.ts"], build: { platform: "neutral", external: ["canonicalize"] } },
  // Tracing with the app's OpenTelemetry tracer (`@opentelemetry/api`, an optional peer dependency);
  // the key's hash is the driver's plain SHA-256, the attempt outcomes the generated contract's numbers.
  { subpath: "./otel", source: "otel.ts", files: ["otel.js", "otel.cjs"], shares: ["sha256.ts", "hex.ts", "generated/contract.ts"], build: { platform: "neutral", external: ["@opentelemetry/api"] } },
  // The service worker's background completion: the client is the app's (its own import of the core);
  // the entry bundles the error class (and the names it shares with the page, SHARED_SOURCES).
  { subpath: "./sw", source: "sw.ts", files: ["sw.js", "sw.cjs"], shares: ["errors.ts", "describe.ts", "mode.ts"], build: { platform: "neutral" } },
  // Durable records for Node (its own file and tsconfig: browsers never load node:fs).
  { subpath: "./file", source: "node/file-storage.ts", files: ["file.js", "file.cjs"], build: { platform: "node", target: "node18" } },
];
/** What every side entry may bundle besides itself: the intent store, and the names of background
 *  completion it shares with the core and the service worker. An entry's `shares` names more. */
const SHARED_SOURCES = ["watch.ts", "background.ts"];
/** What the entries leave to the app (optional peer dependencies): the frameworks, RFC 8785, and the
 *  OpenTelemetry API. */
const PEERS = { react: ">=18", vue: ">=3.3", canonicalize: ">=2", "@opentelemetry/api": ">=1.3 <2" };

/** Step 3b: the side entries, each as ESM and CommonJS with a source map; the build fails if one
 *  bundled a source of the driver other than the store (it may import only types from it). */
async function sideEntries(esbuild, out) {
  for (const { source, files, shares = [], build: options } of SIDE_ENTRIES) {
    for (const [file, format] of [[files[0], "esm"], [files[1], "cjs"]]) {
      const built = await esbuild.build({
        entryPoints: [path.join(DRIVER_DIR, source)], bundle: true, target: "es2020", legalComments: "none", logLevel: "warning", metafile: true,
        define: DEFINES.development, format, minify: true, sourcemap: true, sourcesContent: true, outfile: path.join(out, file), ...options,
      });
      const extra = Object.keys(built.metafile.inputs).map((input) => path.relative(DRIVER_DIR, path.resolve(root, input)))
        .filter((input) => input !== source && !SHARED_SOURCES.includes(input) && !shares.includes(input));
      if (extra.length) throw new Error(`${file} bundles ${extra.join(", ")}: it may import only types from the driver`);
    }
  }
}

/** The command line: `npx idempotent-fetch-client check <url>` runs the package's one bin (named like the
 *  package, see manifest()), a Node program bundled from check/ (its own tsconfig, Node's types). No entry a
 *  page imports reaches it, so it costs pages nothing. */
const CHECK = { source: "check/cli.ts", file: "bin/check.mjs" };
const CHECK_DIR = path.join(DRIVER_DIR, "check") + path.sep;

/** Step 3c: the check command, one ES module for Node 18 (its global fetch) with a shebang. */
async function checkCommand(esbuild, out) {
  const outfile = path.join(out, CHECK.file);
  await esbuild.build({
    entryPoints: [path.join(DRIVER_DIR, CHECK.source)], bundle: true, platform: "node", target: "node18", format: "esm", define: DEFINES.development,
    legalComments: "none", logLevel: "warning", banner: { js: "#!/usr/bin/env node" }, outfile,
  });
  chmodSync(outfile, 0o755);
}

/** A side entry's declarations, as tsc writes them under types/. */
const typesOf = (source) => source.replace(/\.ts$/, ".d.ts");

/** Where the CommonJS copy of the declarations goes (package.json's `require` conditions). */
const CJS_TYPES_DIR = "types-cjs";

/** Step 4: the driver's declarations into pkg/types/ (tsc with the driver's tsconfig), and their
 *  CommonJS twin in pkg/types-cjs/. */
function types(entry, pkg) {
  const tsconfig = path.join(path.dirname(entry), "tsconfig.json");
  if (!existsSync(tsconfig)) throw new Error(`${path.relative(root, tsconfig)} is missing: the driver's tsc settings`);
  const out = path.join(pkg, "types");
  run(path.join(toolsBin, "tsc"), ["-p", tsconfig, "--noEmit", "false", "--declaration", "--emitDeclarationOnly", "--declarationMap", "false", "--outDir", out]);
  if (!existsSync(path.join(out, "index.d.ts"))) throw new Error(`tsc wrote no ${path.relative(root, out)}/index.d.ts (rootDir should be src/js)`);
  // idempotent-fetch-client/file's declarations (its project sees Node's types; rootDir is src/js as well).
  run(path.join(toolsBin, "tsc"), ["-p", path.join(DRIVER_DIR, "node/tsconfig.json"), "--noEmit", "false", "--declaration", "--emitDeclarationOnly", "--declarationMap", "false", "--outDir", out]);
  // The same declarations for `require` (node.cjs): TypeScript reads a .d.ts as ESM or CommonJS by the
  // nearest package.json's "type", and a CommonJS file may not import ESM declarations (TS1479 under
  // `module: node16`/`nodenext`), so the copy sits under its own {"type": "commonjs"}.
  const cjs = path.join(pkg, CJS_TYPES_DIR);
  cpSync(out, cjs, { recursive: true });
  writeFileSync(path.join(cjs, "package.json"), `${JSON.stringify({ type: "commonjs" })}\n`);
}

/** Step 5: package.json. The conditions, most specific first (package/README.md explains each). */
function manifest(crate, npmName, out) {
  // The `development` condition first (conditions are tried in order), the production build as the default.
  const byBuild = (file) => ({ development: `./${fileOf(file, "development")}`, default: `./${file}` });
  const browserFiles = BUILDS.flatMap((flavour) => [BROWSER_ENTRY, ...LAZY_PARTS.map(({ file }) => file), WORKER_ENTRY].map((file) => fileOf(file, flavour)));
  const esmTypes = "./types/index.d.ts";
  const cjsTypes = `./${CJS_TYPES_DIR}/index.d.ts`;
  const pkg = {
    name: npmName,
    version: crate.version,
    description: crate.description,
    license: crate.license,
    repository: crate.repository ? { type: "git", url: `git+${crate.repository}.git` } : undefined,
    keywords: crate.keywords,
    type: "module",
    sideEffects: false,
    main: "./node.cjs",
    module: `./${BROWSER_ENTRY}`,
    browser: `./${BROWSER_ENTRY}`,
    types: "./types/index.d.ts",
    bin: { [npmName]: `./${CHECK.file}` },
    exports: {
      // `types` sits in each import/require branch (not first), so TypeScript gives `require` the
      // CommonJS declarations and `import` the ESM ones.
      // Browsers and bundlers: the production build unless the bundler resolves `development`.
      ".": {
        node: { import: { types: esmTypes, default: "./node.js" }, require: { types: cjsTypes, default: "./node.cjs" } },
        worker: byBuild(BROWSER_ENTRY),
        browser: byBuild(BROWSER_ENTRY),
        import: { types: esmTypes, ...byBuild(BROWSER_ENTRY) },
        require: { types: cjsTypes, default: "./node.cjs" },
        default: { types: esmTypes, ...byBuild(BROWSER_ENTRY) },
      },
      // The core with every part bundled in, for service workers (they cannot import() a part).
      "./worker": { types: esmTypes, ...byBuild(WORKER_ENTRY) },
      // The store, the framework bindings (each framework is the app's) and the Node file storage.
      ...Object.fromEntries(SIDE_ENTRIES.map(({ subpath, source, files }) => [subpath, {
        import: { types: `./types/${typesOf(source)}`, default: `./${files[0]}` },
        require: { types: `./${CJS_TYPES_DIR}/${typesOf(source)}`, default: `./${files[1]}` },
      }])),
      "./package.json": "./package.json",
    },
    peerDependencies: PEERS,
    peerDependenciesMeta: Object.fromEntries(Object.keys(PEERS).map((name) => [name, { optional: true }])),
    files: [
      ...browserFiles.flatMap((file) => [file, `${file}.map`]), "node.js", "node.cjs",
      ...SIDE_ENTRIES.flatMap(({ files }) => files.flatMap((file) => [file, `${file}.map`])), WASM_FILE, CHECK.file, "types/", `${CJS_TYPES_DIR}/`, "README.md", "LICENSE-MIT", "LICENSE-APACHE"],
    engines: { node: ">=18" },
  };
  writeFileSync(path.join(out, "package.json"), `${JSON.stringify(pkg, null, 2)}\n`);
}

/**
 * The whole build. `entry` and `features` exist for experiments (another driver entry, cargo features
 * on top of --no-default-features); the package is built with the defaults.
 */
export async function build({ entry = path.join(DRIVER_DIR, "index.ts"), features = [] } = {}) {
  const meta = crateMetadata();
  const { rawWasm, tmp } = releaseWasm(meta, features);
  try {
    if (!existsSync(entry)) throw new Error(`${path.relative(root, entry)} does not exist: the driver's entry (src/js/README.md)`);
    // Built next to pkg/ and swapped in at the end, so tests and servers reading pkg/ meanwhile never
    // see half a package (the worktree is shared).
    const out = `${PKG_DIR}-building-${process.pid}`;
    rmSync(out, { recursive: true, force: true });
    mkdirSync(out, { recursive: true });
    try {
      const optimized = path.join(tmp, "optimized.wasm");
      run(path.join(toolsBin, "wasm-opt"), [...meta.wasmOpt, rawWasm, "-o", optimized]);
      const used = path.join(tmp, "used.wasm");
      dropUnusedExports(optimized, used);
      const wasmNames = minifyNames(used, path.join(out, WASM_FILE));
      const names = await bundles(entry, out, wasmNames);
      console.log(`esbuild: ${BROWSER_ENTRY}, node.cjs (exports: ${names.join(", ")})`);
      writeFileSync(path.join(out, "node.js"),
        `// Node ESM: the same instance as require("idempotent-fetch-client") (no dual-package hazard).\n` +
        `import lib from "./node.cjs";\nexport const { ${names.join(", ")} } = lib;\n`);
      types(entry, out);
      manifest(meta.crate, meta.npmName, out);
      // The npm page is the package's own README (install, quick start, bindings; absolute links);
      // the repository's README.md is the project's side (building, testing, the server).
      copyFileSync(NPM_README, path.join(out, "README.md"));
      for (const file of ["LICENSE-MIT", "LICENSE-APACHE"]) copyFileSync(path.join(root, file), path.join(out, file));
      rmSync(PKG_DIR, { recursive: true, force: true });
      renameSync(out, PKG_DIR);
      writeFileSync(WASM_NAMES_FILE, JSON.stringify({ module: wasmNames.module, imports: [...wasmNames.imports], exports: [...wasmNames.exports] }));
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
    console.log(`built ${path.relative(root, PKG_DIR)}/`);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  if (args.length) {
    console.error(`usage: node package/build.mjs (unknown: ${args.join(" ")})`);
    process.exit(2);
  }
  build()
    .catch((error) => {
      console.error(`package build failed: ${error.message}`);
      process.exit(1);
    });
}
