// An agent process that runs the README's tool-call recipe as written (copied by
// tests/js/file-storage.test.mjs into an app folder whose node_modules holds the package and
// canonicalize; the process's working folder is that app's, where the recipe keeps its records):
//   node replan.mjs <recipe.mjs> <server url> <bearer token> <run id> <tool-call id> <order JSON>
// The tool-call id is what the model gave this turn: printed, never used by the recipe. Prints
// {"event":"key",...} once the intent's key is known, {"event":"retry",...} at each retry, then
// {"event":"done",...} or {"event":"error",...}.
import { pathToFileURL } from "node:url";

const [recipe, api, token, runId, toolCallId, order] = process.argv.slice(2);
const { client, placeOrder } = await import(pathToFileURL(recipe).href);
const say = (event) => console.log(JSON.stringify(event));
client.addEventListener("attempt", (e) => e.attempt === 1 && say({ event: "key", key: e.key, toolCallId, intentId: e.intentId }));
client.addEventListener("retry", (e) => say({ event: "retry", attempt: e.attempt, reason: e.reason }));
try {
  const placed = await placeOrder({ id: runId, api, token }, JSON.parse(order));
  say({ event: "done", order: placed });
} catch (error) {
  say({ event: "error", code: error?.code, message: String(error?.message ?? error) });
}
