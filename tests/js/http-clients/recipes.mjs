// The README recipes "HTTP clients on top" (ky, ofetch, axios's fetch adapter), word for word, and the
// checkout they run: one click is one intent id, "Try again" reuses it. Shared by the Node runner
// (tests/js/http-clients.test.mjs) and the browser page (tests/js/http-clients/page.html, driven by
// tests/js/http-clients-browser.test.mjs). Imports nothing: the HTTP clients come in `libs`, so the
// module loads unchanged in Node and in a page.

/** Each recipe places one order (`cart`) under `intent` at `url` through its HTTP client on top of
 *  `client.fetch`, and resolves to the parsed JSON answer. `headers`: how the server knows the
 *  account (a bearer token in Node; the page's cookie in a browser). */
export const recipes = {
  // ky: its own retry off (a retry of ky is a new client.fetch call: a new intent, a new key) and its
  // timeout off (it would abort the library's retries); the intent rides in ky's options, which ky
  // hands to `fetch` as its init.
  async ky({ client, libs: { ky }, url, headers, intent, cart }) {
    const api = ky.create({ fetch: client.fetch, retry: 0, timeout: false });
    return api.post(url, { json: cart, headers, intent }).json();
  },
  // ofetch: retry off (its default for POST already), no timeout; client.fetch goes in create's second
  // argument (its global options: the first holds request defaults); the intent rides in its options.
  async ofetch({ client, libs: { ofetch }, url, headers, intent, cart }) {
    const api = ofetch.create({ retry: 0 }, { fetch: client.fetch });
    return api(url, { method: "POST", body: cart, headers, intent });
  },
  // axios: the fetch adapter with client.fetch as its fetch; the intent rides in `fetchOptions`.
  // axios has no retry of its own; `timeout` stays 0 (none).
  async axios({ client, libs: { axios }, url, headers, intent, cart }) {
    const api = axios.create({ adapter: "fetch", env: { fetch: client.fetch } });
    const { data } = await api.post(url, cart, { headers, fetchOptions: { intent } });
    return data;
  },
};

/** The library's own error behind an HTTP client's: ky rethrows fetch's rejection as is, ofetch
 *  (FetchError) and axios (AxiosError) keep it as `cause`. */
export function libraryError(lib, error) {
  if (lib.isIdempotentFetchError(error)) return error;
  if (lib.isIdempotentFetchError(error?.cause)) return error.cause;
  return null;
}

/**
 * One click of Pay through recipe `name`, plus "Try again" (the same intent id) while a send runs out
 * of attempts, at most 4 clicks. Resolves to { order, clicks, attempts, keys } (every key an attempt
 * carried).
 */
export async function payOnce({ lib, libs, name, url, headers, namespace, storage, retry }) {
  const client = new lib.IdempotentClient({ namespace, storage, retry });
  const keys = new Set();
  let attempts = 0;
  client.addEventListener("attempt", (event) => {
    keys.add(event.key);
    attempts += 1;
  });
  const intent = "checkout:cart-42";
  const cart = { items: [{ sku: "mug", qty: 2 }] };
  for (let clicks = 1; ; clicks++) {
    try {
      const order = await recipes[name]({ client, libs, url, headers, intent, cart });
      return { order, clicks, attempts, keys: [...keys] };
    } catch (error) {
      const ours = libraryError(lib, error);
      if (ours?.code !== "RETRIES_EXHAUSTED" || clicks >= 4) throw ours ?? error;
    }
  }
}
