
// Appended by tests/js/package.test.mjs (not part of the README's quick start): one use of each part
// the package loads on demand, so the test proves each bundler emitted and wired the parts' chunks.
// No request reaches the server: begin stores the intent, and the intent is discarded.
window.__partsProbe = async () => {
  const done = [];
  const probe = async (name, options, body) => {
    const probeClient = new IdempotentClient({ namespace: `parts-${name}`, ...options });
    const op = await probeClient.begin(`probe:${name}`, { url: "/api/orders", method: "POST", headers: { "content-type": "application/json" }, body });
    await probeClient.discard(op.intentId);
    done.push(`${name}:${probeClient.storage}`);
  };
  await probe("placement", { keyIn: { json: "idempotency_key" } }, "{}");
  await probe("body", {}, new Blob(["{}"]));
  await probe("indexeddb", { storage: "indexeddb" }, "{}");
  const texts = new Map();
  await probe("custom", {
    storage: {
      get: async (ns, id) => texts.get(`${ns}:${id}`),
      put: async (ns, id, text) => void texts.set(`${ns}:${id}`, text),
      delete: async (ns, id) => void texts.delete(`${ns}:${id}`),
      all: async (ns) => [...texts].filter(([k]) => k.startsWith(`${ns}:`)).map(([k, v]) => [k.slice(ns.length + 1), v]),
    },
  }, "{}");
  return done.join(" ");
};
