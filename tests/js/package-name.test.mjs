// The name a user types is the package we build. The registry's `idempotent-fetch` is another project's
// package, so a README that says `npm install idempotent-fetch` (or imports it) gives the reader somebody
// else's code. Every install command, import, require, `npx` line and import map in what users read must
// name pkg/package.json's name, and that name is the one in Cargo.toml `[package.metadata.npm]`.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, readdirSync, existsSync } from "node:fs";
import path from "node:path";

import { pkgDir, root as repoRoot } from "../support/paths.mjs";

const manifest = JSON.parse(readFileSync(path.join(pkgDir, "package.json"), "utf8"));
const name = manifest.name;

/** Markdown, HTML and the examples' sources: what a user copies from. */
function documents() {
  const files = ["README.md", "package/npm-README.md", "server/README.md", "docs/ARCHITECTURE.md", "src/js/README.md"];
  const examples = path.join(repoRoot, "examples");
  const walk = (dir) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (entry.name === "node_modules" || entry.name === "target") continue;
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (/\.(md|mjs|js|ts|json|html)$/.test(entry.name) && entry.name !== "package-lock.json") {
        files.push(path.relative(repoRoot, full));
      }
    }
  };
  walk(examples);
  return files.filter((file) => existsSync(path.join(repoRoot, file)));
}

/** The server half's npm package (server/node/package.json): `npx idempotent-endpoint dev` is ours too. */
const nodeServerName = JSON.parse(readFileSync(path.join(repoRoot, "server/node/package.json"), "utf8")).name;

/** The package names a text installs, imports or runs (bare specifiers of this project's entries). */
function namedPackages(text) {
  const found = [];
  const patterns = [
    /npm (?:install|i|add)\s+(?:--?[\w-]+\s+)*([@\w./-]*idempotent[\w.-]*)/g,
    /from\s+["']([@\w.-]*idempotent[\w.-]*)(?:\/[\w-]+)?["']/g,
    /(?:import|require)\(\s*["']([@\w.-]*idempotent[\w.-]*)(?:\/[\w-]+)?["']\s*\)/g,
    /npx\s+(?:--?[\w-]+\s+)*([@\w.-]*idempotent[\w.-]*)/g,
    /"imports"\s*:\s*\{\s*"([@\w.-]*idempotent[\w.-]*)"/g,
  ];
  for (const pattern of patterns) for (const match of text.matchAll(pattern)) found.push(match[1]);
  return found;
}

test("pkg/package.json is named by Cargo.toml [package.metadata.npm], not the crate", () => {
  const cargo = readFileSync(path.join(repoRoot, "Cargo.toml"), "utf8");
  const declared = /\[package\.metadata\.npm\]\s*\nname\s*=\s*"([^"]+)"/.exec(cargo)?.[1];
  assert.equal(name, declared);
  assert.notEqual(name, "idempotent-fetch", "the registry's idempotent-fetch is another project's package");
  assert.deepEqual(Object.keys(manifest.bin ?? {}), [name], "the one bin has the package's name, so `npx NAME check` runs it");
});

test("every install command, import, require, npx line and import map users read names the package we build", () => {
  const wrong = [];
  let seen = 0;
  for (const file of documents()) {
    const text = readFileSync(path.join(repoRoot, file), "utf8");
    for (const named of namedPackages(text)) {
      seen += 1;
      // The server library's crate and the demo's own names are not npm packages of ours to install; the
      // server half's Node package (server/node) is.
      if (named !== name && named !== nodeServerName) wrong.push(`${file}: ${named}`);
    }
  }
  assert.ok(seen >= 10, `found only ${seen} install/import lines: the patterns no longer match the documents`);
  assert.deepEqual(wrong, [], `documents name another package than ${name}`);
});

test("the patterns catch the other project's name (so the test above can fail)", () => {
  assert.deepEqual(namedPackages("npm install idempotent-fetch\nimport { x } from \"idempotent-fetch/react\";"), [
    "idempotent-fetch",
    "idempotent-fetch",
  ]);
});
