// The HTTP clients of the recipes (this folder's package.json: test-only devDependencies, never the
// shipped package's): `npm ci` when node_modules is missing or older than the lockfile.
import { spawnSync } from "node:child_process";
import { existsSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const clientsDir = path.dirname(fileURLToPath(import.meta.url));

export function installClients() {
  const marker = path.join(clientsDir, "node_modules/.package-lock.json");
  const lock = path.join(clientsDir, "package-lock.json");
  if (existsSync(marker) && statSync(marker).mtimeMs >= statSync(lock).mtimeMs) return;
  console.log("http-clients: npm ci (ky, ofetch, axios from the lockfile)");
  const result = spawnSync("npm", ["ci", "--no-audit", "--no-fund"], { cwd: clientsDir, stdio: ["ignore", "inherit", "inherit"] });
  if (result.error || result.status !== 0) throw new Error(`npm ci in ${clientsDir} failed (${result.error?.message ?? result.status})`);
}
