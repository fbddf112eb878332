#!/usr/bin/env node
// `idempotent-endpoint dev [--port N] [--data DIR] [--faults] [--work-ms N]`: the dev server (./dev.ts).
import { startDevServer, type DevOptions } from "./dev.js";

const USAGE = `usage: idempotent-endpoint dev [options]

Starts a protected example endpoint on 127.0.0.1: POST /api/orders (Idempotency-Key required), its key
status at GET/POST /api/idempotency-keys/{key}, and GET /api/orders (the order count), on PGlite.

options:
  --port N         the port (default 8787; 0 picks a free one)
  --data DIR       the PGlite data folder (default .idempotent-endpoint-dev; memory:// keeps nothing)
  --faults         answer 20% of order requests 503 before any work, and lose 20% of done answers
                   (committed, then the connection is cut): what the browser package retries through
  --work-ms N      how long each order's work takes in its transaction (default 150)`;

/** The options from the command line, or a usage error's message. */
function parse(args: string[]): DevOptions | string {
  const options: DevOptions = {};
  for (let i = 0; i < args.length; i++) {
    const flag = args[i];
    const value = (): string | undefined => args[++i];
    if (flag === "--faults") Object.assign(options, { failShare: 0.2, loseShare: 0.2 });
    else if (flag === "--port" || flag === "--work-ms") {
      const n = Number(value());
      if (!Number.isInteger(n) || n < 0) return `${flag} takes a whole number`;
      if (flag === "--port") options.port = n;
      else options.workMs = n;
    } else if (flag === "--data") {
      const dir = value();
      if (dir === undefined) return "--data takes a folder";
      options.dataDir = dir;
    } else return `unknown option ${flag}`;
  }
  return options;
}

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === "-h" || command === "--help") {
    console.log(USAGE);
    return 0;
  }
  const options = command === "dev" ? parse(rest) : `unknown command ${command ?? "(none)"}: the one command is dev`;
  if (typeof options === "string") {
    console.error(`idempotent-endpoint: ${options}\n\n${USAGE}`);
    return 2;
  }
  const server = await startDevServer(options);
  const faults = options.failShare ? " with faults (20% 503, 20% lost answers)" : "";
  console.log(`idempotent-endpoint dev: POST ${server.url}${faults}\n  key status: ${server.keyStatusUrl}\n  check it: npx idempotent-fetch-client check ${server.url} --key-status-url ${server.keyStatusUrl}`);
  const stop = (): void => {
    void server.close().then(() => process.exit(0));
  };
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
  return -1;
}

main(process.argv.slice(2)).then(
  (status) => {
    if (status >= 0) process.exitCode = status;
  },
  (error: unknown) => {
    console.error(`idempotent-endpoint: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    process.exitCode = 1;
  },
);
