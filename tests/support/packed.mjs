// The package as `npm pack` makes it: what publishing would ship (package.json "files"), for the
// tests that install it as users do.
//
//   packPackage(destination)   `npm pack pkg/` into `destination`; resolves to { tarball, files }
//                              (the tarball's path, and the paths it holds, sorted)
import { spawnSync } from "node:child_process";
import path from "node:path";

import { pkgDir } from "./paths.mjs";

export function packPackage(destination) {
  const result = spawnSync("npm", ["pack", pkgDir, "--json", "--pack-destination", destination], { encoding: "utf8", maxBuffer: 64 << 20 });
  if (result.error) throw new Error(`npm pack: ${result.error.message}`);
  if (result.status !== 0) throw new Error(`npm pack ${pkgDir} failed (${result.status})\n${result.stdout}\n${result.stderr}`.trim());
  const [packed] = JSON.parse(result.stdout);
  return { tarball: path.join(destination, packed.filename), files: packed.files.map((file) => file.path).sort() };
}
