// Server rendering (as Next.js or a Node render does it): the package and idempotent-fetch-client/react are
// imported where there is no `window`, and a component using the hook renders to HTML. Nothing may
// throw or reject unhandled; the hook renders its first phase and runs nothing (effects do not run on
// the server). Prints one JSON line. Run by tests/js/package.test.mjs next to the React app's
// node_modules (react, react-dom) with the packed package installed.
import { createElement } from "react";
import { renderToString } from "react-dom/server";

const problems = [];
process.on("unhandledRejection", (reason) => problems.push(`unhandled rejection: ${reason?.stack ?? reason}`));
process.on("uncaughtException", (error) => problems.push(`uncaught: ${error?.stack ?? error}`));

const globals = { window: typeof window, document: typeof document, localStorage: typeof localStorage };
const core = await import("idempotent-fetch-client");
const { useIdempotentAction } = await import("idempotent-fetch-client/react");

const client = new core.IdempotentClient({ namespace: "acct_ssr" });
function Checkout() {
  const pay = useIdempotentAction("checkout:cart-42", { url: "http://127.0.0.1/api/orders", body: "{}" }, { client });
  return createElement("p", { "data-phase": pay.phase }, `${pay.phase} ${pay.key ?? "no key"} ${pay.retryInMs ?? "no countdown"}`);
}
const html = renderToString(createElement(Checkout));
await core.ready;
await new Promise((resolve) => setTimeout(resolve, 100)); // a late rejection would land here
const pending = await client.pending();
console.log(JSON.stringify({ globals, html, storage: client.storage, pending: pending.length, problems }));
