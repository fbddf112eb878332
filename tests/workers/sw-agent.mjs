// The worker agent (agent-core.mjs) over idempotent-fetch-client/worker, the entry for service workers: they
// may not import(), so every part is bundled in.
import * as lib from "/pkg/worker.js";
import { startAgent } from "./agent-core.mjs";

startAgent(lib);
