// A static file server for test pages: serves `dir` (default: the repository root) on
// 127.0.0.1:<free port>, with the content types a browser insists on (application/wasm for
// WebAssembly.instantiateStreaming, text/javascript for module scripts and workers), no caching,
// 403 outside `dir`, 404 for a missing file. /pkg/ serves the built package (paths.mjs pkgDir).
//
//   const statics = await startStaticServer({ dir, cors: true });  // statics.url, await statics.close()
//
// cors: adds `Access-Control-Allow-Origin: *` (an opaque-origin data: worker importing the package).
import { readFile } from "node:fs/promises";
import http from "node:http";
import path from "node:path";

import { pkgDir, root } from "./paths.mjs";

export const CONTENT_TYPES = {
  ".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".mjs": "text/javascript; charset=utf-8",
  ".wasm": "application/wasm", ".json": "application/json", ".css": "text/css", ".ts": "text/plain; charset=utf-8",
};

export function startStaticServer({ dir = root, cors = false } = {}) {
  const base = path.resolve(dir);
  const httpServer = http.createServer(async (req, res) => {
    const pathname = decodeURIComponent(new URL(req.url, "http://127.0.0.1").pathname);
    // /pkg/ is the built package wherever it is ($IF_PKG), as the reference server's --pkg serves it.
    const [dirOfUrl, rest] = pathname.startsWith("/pkg/") ? [path.resolve(pkgDir), pathname.slice(4)] : [base, pathname];
    const file = path.resolve(dirOfUrl, "." + rest);
    if (!file.startsWith(dirOfUrl + path.sep)) {
      res.writeHead(403).end();
      return;
    }
    try {
      const body = await readFile(file);
      const headers = { "content-type": CONTENT_TYPES[path.extname(file)] ?? "application/octet-stream", "cache-control": "no-store" };
      if (cors) headers["access-control-allow-origin"] = "*";
      res.writeHead(200, headers).end(body);
    } catch {
      res.writeHead(404).end();
    }
  });
  return new Promise((resolve) => {
    httpServer.listen(0, "127.0.0.1", () => {
      resolve({
        url: `http://127.0.0.1:${httpServer.address().port}`,
        close: () => new Promise((done) => { httpServer.closeAllConnections(); httpServer.close(() => done()); }),
      });
    });
  });
}
