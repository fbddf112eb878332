// The worker agent (agent-core.mjs) over the package's main entry: for module dedicated workers,
// which load the parts used on demand with import() like a page.
import * as lib from "/pkg/index.js";
import { startAgent } from "./agent-core.mjs";

startAgent(lib);
