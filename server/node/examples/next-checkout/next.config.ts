import type { NextConfig } from "next";

const nextConfig: NextConfig = {
  // The endpoint loads its wasm core from its own folder at run time: Node requires it, unbundled.
  serverExternalPackages: ["idempotent-endpoint"],
  // This app is its own project (its own lockfile), not part of the repository's server/node package.
  turbopack: { root: __dirname },
  outputFileTracingRoot: __dirname,
};

export default nextConfig;
