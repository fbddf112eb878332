// Node, CommonJS: `require` of the installed package (package.json exports: "node" + "require").
// Pays once against the reference server at argv[2] as the account argv[3] (namespace), with the request
// headers of the JSON argv[4] (how the server knows the account), and prints what happened as one JSON line.
// Run by tests/js/package.test.mjs from a folder where the packed package is installed.
const { IdempotentClient, isIdempotentFetchError } = require("idempotent-fetch-client");

async function main() {
  const [server, account, accountHeaders] = process.argv.slice(2);
  const client = new IdempotentClient({ namespace: account, retry: { baseDelayMs: 20, maxDelayMs: 200, maxAttempts: 30 } });
  const op = await client.begin("checkout:cart-42", {
    url: `${server}/api/orders`,
    method: "POST",
    headers: { "content-type": "application/json", ...JSON.parse(accountHeaders) },
    body: JSON.stringify({ items: [{ sku: "mug", qty: 2 }] }),
  });
  try {
    const { response, ok, replayed, attempts } = await op.send();
    const order = await response.json();
    console.log(JSON.stringify({ key: op.key, ok, replayed, attempts, orderId: order.id, storage: client.storage }));
  } catch (error) {
    console.log(JSON.stringify({ key: op.key, code: isIdempotentFetchError(error) ? error.code : String(error) }));
  }
}
main();
