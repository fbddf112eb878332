// The demo checkout page: one click on Pay = one intent = one idempotency key = one order.
//
// Query parameters (for the demo and the end-to-end tests):
//   ?account=ID    the library namespace (default "demo") and, on a server started with --enable-faults (the
//                  demo and the tests), the session's account; otherwise the session keeps this browser's
//                  account or starts a fresh one
//   ?fast=1        a quick retry policy (base 100 ms, cap 1 s) so tests do not wait on real backoff
//   ?attempts=N    attempts per send (to see "gave up" quickly)
//   ?background=1  background completion: intents in IndexedDB, begun with `background: true`, and the
//                  service worker www/sw.js finishes one whose tab was closed (README, "Background completion")
//   ?traces=URL    trace every payment (idempotent-fetch-client/otel, www/tracing.mjs), exporting the spans
//                  over OTLP/HTTP to the trace receiver at URL, and draw the current payment's trace from it
//                  (www/timeline.js); `cargo xtask demo` prints the page's address with it
import { IdempotentClient, isIdempotentFetchError, ready } from "/pkg/index.js";

const params = new URLSearchParams(location.search);
const FAST = params.has("fast") && params.get("fast") !== "0";
const BACKGROUND = params.has("background") && params.get("background") !== "0";
const ACCOUNT = /^[A-Za-z0-9_-]{1,64}$/.test(params.get("account") ?? "") ? params.get("account") : "demo";
const TRACES = /^https?:\/\/[^\s]+$/.test(params.get("traces") ?? "") ? params.get("traces").replace(/\/+$/, "") : null;
/** Each intent's trace id (intent id -> trace id), kept across reloads: the timeline draws the current one. */
const TRACE_IDS_STORAGE_KEY = `idempotent-fetch-demo:${ACCOUNT}:traces`;
const CART_STORAGE_KEY = `idempotent-fetch-demo:${ACCOUNT}:cart`;
const ORDERS_REFRESH_MS = 2000;
let sessionAccount = ACCOUNT; // the account of the server session, once started
let sessionStarted = false;

const $ = (id) => document.getElementById(id);
const el = {
  app: $("app"), accountId: $("account-id"), cartId: $("cart-id"), cartLines: $("cart-lines"), cartTotal: $("cart-total"),
  cartLockedNote: $("cart-locked-note"), pay: $("pay"), tryAgain: $("try-again"), cancel: $("cancel"), newCart: $("new-cart"),
  statusBox: $("status-box"), status: $("status"), countdown: $("countdown"), statusDetail: $("status-detail"),
  key: $("intent-key"), attempt: $("attempt"), orderId: $("order-id"), log: $("log"),
  orders: $("orders"), ordersSummary: $("orders-summary"), refreshOrders: $("refresh-orders"),
  offlineBanner: $("offline-banner"), storageBanner: $("storage-banner"), loadError: $("load-error"),
  faultsForm: $("faults-form"), faultsStatus: $("faults-status"),
  traceCard: $("trace-card"), traceSummary: $("trace-summary"), timeline: $("timeline"),
};

/** What the page knows. `phase` drives every button; see `render`. */
const page = {
  phase: "loading", // loading | idle | sending | waiting | offline | paid | failed | gaveup | expired
  products: [],
  cart: null, // { id, items: { sku: qty }, paid: null | { orderId, key, totalCents, currency } }
  client: null,
  op: null, // the IdempotentOperation of the current intent
  key: null,
  attempt: null,
  resuming: false,
  /** The key the client last asked the server about (its `reconcile` event). */
  reconciled: null,
  abort: null,
  retryAt: 0,
  retryReason: "",
  countdownTimer: 0,
};

// ---------------------------------------------------------------- storage (the page's own cart)

function readStored(key) {
  try { return JSON.parse(localStorage.getItem(key) ?? "null"); } catch { return null; }
}
function writeStored(key, value) {
  try { localStorage.setItem(key, JSON.stringify(value)); } catch { /* blocked or full: the cart lives in memory */ }
}
function randomId() {
  const bytes = crypto.getRandomValues(new Uint8Array(6));
  return "cart-" + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}
function newCart() {
  const items = {};
  if (page.products.length > 0) items[page.products[0].sku] = 1;
  return { id: randomId(), items, paid: null };
}
function saveCart() { writeStored(CART_STORAGE_KEY, page.cart); }
function intentId() { return `checkout:${page.cart.id}`; }

/** The order request of the cart: deterministic, so a reload builds byte-identical bytes (same fingerprint). */
function orderRequest() {
  const items = Object.entries(page.cart.items)
    .filter(([, qty]) => qty > 0)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([sku, qty]) => ({ sku, qty }));
  return {
    url: "/api/orders",
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ cartId: page.cart.id, items }),
  };
}

// ---------------------------------------------------------------- formatting

function money(cents, currency = "EUR") {
  return new Intl.NumberFormat("en-IE", { style: "currency", currency }).format(cents / 100);
}
function cartTotalCents() {
  return page.products.reduce((sum, p) => sum + p.priceCents * (page.cart?.items[p.sku] ?? 0), 0);
}
function cartCount() {
  return Object.values(page.cart?.items ?? {}).reduce((a, b) => a + b, 0);
}
function shortKey(key) { return key ? `${key.slice(0, 8)}…` : ""; }
function clock() {
  const d = new Date();
  return d.toLocaleTimeString("en-GB", { hour12: false }) + "." + String(d.getMilliseconds()).padStart(3, "0");
}
function log(text) {
  const li = document.createElement("li");
  li.innerHTML = `<time></time> <span></span>`;
  li.firstChild.textContent = clock();
  li.lastChild.textContent = text;
  el.log.prepend(li);
  while (el.log.children.length > 100) el.log.lastChild.remove();
}

// ---------------------------------------------------------------- rendering

const BUSY = new Set(["sending", "waiting", "offline"]);

function setPhase(phase, title, detail = "") {
  page.phase = phase;
  el.app.dataset.state = phase;
  el.statusBox.className = `status status-${phase}`;
  if (el.status.textContent !== title) el.status.textContent = title;
  el.statusDetail.textContent = detail;
  if (phase !== "waiting") stopCountdown();
  render();
}

/** Locked: the cart has an open intent (changing it would be a different request under the same key). */
function cartLocked() {
  return page.phase !== "idle" && page.phase !== "failed";
}

function render() {
  const busy = BUSY.has(page.phase);
  const hasItems = cartCount() > 0;
  el.pay.hidden = page.phase === "gaveup" || page.phase === "paid" || page.phase === "expired";
  el.pay.disabled = busy || page.phase === "loading" || !hasItems;
  el.pay.textContent = busy ? "Paying…" : hasItems ? `Pay ${money(cartTotalCents())}` : "Pay";
  el.tryAgain.hidden = page.phase !== "gaveup";
  el.cancel.hidden = !busy;
  el.newCart.disabled = busy || page.phase === "loading";
  el.newCart.classList.toggle("primary", page.phase === "paid");
  el.key.textContent = page.key ?? "none yet";
  el.attempt.textContent = page.attempt != null ? String(page.attempt) : page.key ? "none sent yet" : "–";
  el.orderId.textContent = page.cart?.paid?.orderId ?? "–";
  el.cartLockedNote.hidden = !cartLocked() || page.phase === "paid" || page.phase === "loading";
  el.app.setAttribute("aria-busy", String(page.phase === "loading"));
  renderCart();
}

function renderCart() {
  if (!page.cart || page.products.length === 0) return;
  el.cartId.textContent = page.cart.id;
  const locked = cartLocked();
  const rows = page.products.map((p) => {
    const qty = page.cart.items[p.sku] ?? 0;
    const tr = document.createElement("tr");
    tr.innerHTML = `<th scope="row"></th><td class="num price"></td>
      <td class="qty-col"><div class="qty">
        <button type="button" class="step" data-step="-1" aria-label="One fewer">−</button>
        <input type="number" inputmode="numeric" min="0" max="99" step="1">
        <button type="button" class="step" data-step="1" aria-label="One more">+</button>
      </div></td><td class="num"></td>`;
    tr.dataset.sku = p.sku;
    tr.children[0].textContent = p.name;
    tr.children[1].textContent = money(p.priceCents, p.currency);
    tr.children[3].textContent = money(p.priceCents * qty, p.currency);
    const input = tr.querySelector("input");
    input.value = String(qty);
    input.setAttribute("aria-label", `Quantity of ${p.name}`);
    input.disabled = locked;
    for (const b of tr.querySelectorAll("button.step")) {
      b.disabled = locked || (b.dataset.step === "-1" ? qty <= 0 : qty >= 99);
      b.setAttribute("aria-label", `${b.dataset.step === "-1" ? "One fewer" : "One more"} ${p.name}`);
    }
    return tr;
  });
  // Keep focus on the control the user is using while the table is rebuilt.
  const focused = document.activeElement?.closest?.("#cart-lines tr");
  const focusSku = focused?.dataset.sku;
  const focusSel = document.activeElement?.matches?.("input") ? "input" : `button[data-step="${document.activeElement?.dataset?.step}"]`;
  el.cartLines.replaceChildren(...rows);
  if (focusSku) el.cartLines.querySelector(`tr[data-sku="${focusSku}"] ${focusSel}`)?.focus();
  el.cartTotal.textContent = money(cartTotalCents(), page.products[0]?.currency);
}

function setQty(sku, qty) {
  if (cartLocked()) return;
  const n = Math.max(0, Math.min(99, Math.floor(Number(qty) || 0)));
  if (n === 0) delete page.cart.items[sku]; else page.cart.items[sku] = n;
  saveCart();
  render();
}

// ---------------------------------------------------------------- countdown

function startCountdown(delayMs, reason) {
  page.retryAt = performance.now() + delayMs;
  page.retryReason = reason;
  el.countdown.hidden = false;
  tickCountdown();
  clearInterval(page.countdownTimer);
  page.countdownTimer = setInterval(tickCountdown, 100);
}
function tickCountdown() {
  const left = Math.max(0, page.retryAt - performance.now()) / 1000;
  el.countdown.textContent = `Retrying in ${left.toFixed(1)} s — ${page.retryReason}`;
}
function stopCountdown() {
  clearInterval(page.countdownTimer);
  el.countdown.hidden = true;
  el.countdown.textContent = "";
}

// ---------------------------------------------------------------- paying

function resumingNote() {
  return page.resuming ? `Resuming your payment (same key ${shortKey(page.key)}) after the page was reloaded. ` : "";
}

async function pay() {
  if (BUSY.has(page.phase) || cartCount() === 0) return;
  let op;
  try {
    op = await page.client.begin(intentId(), orderRequest(), BACKGROUND ? { background: true } : undefined);
  } catch (error) {
    showError(error, "Could not start the payment");
    return;
  }
  page.resuming = false;
  await send(op);
}

/** Sends the intent until a definite answer, showing each attempt and wait. */
async function send(op) {
  page.op = op;
  page.key = op.key;
  page.abort = new AbortController();
  page.reconciled = null;
  setPhase("sending", page.resuming ? "Resuming your payment…" : "Sending your payment…", resumingNote());
  log(`${page.resuming ? "resume" : "begin"} ${op.intentId} with key ${op.key}`);
  try {
    const result = await op.send({
      signal: page.abort.signal,
      onAttempt: (e) => {
        page.key = e.key; // the stored key (another tab may have begun this intent first)
        page.attempt = e.totalAttempts;
        log(`attempt ${e.totalAttempts} with key ${shortKey(e.key)}`);
        setPhase("sending", page.resuming ? "Resuming your payment…" : "Sending your payment…",
          resumingNote() + `Attempt ${e.totalAttempts} is on its way to the server.`);
      },
      onRetry: (e) => {
        log(`no definite answer: ${e.reason}; retrying in ${(e.delayMs / 1000).toFixed(1)} s`);
        setPhase("waiting", "Not confirmed yet: retrying with the same key",
          resumingNote() + "You will not be charged twice: the server recognises the key.");
        startCountdown(e.delayMs, e.reason);
      },
    });
    await finished(result);
  } catch (error) {
    failedToConfirm(error);
  } finally {
    page.abort = null;
    refreshOrders();
    refreshTrace();
    // A crash fault ends the server, which comes back without faults: the panel follows it.
    loadFaults();
  }
}

async function finished(result) {
  page.key = result.key;
  let body = null;
  try { body = await result.response.json(); } catch { /* not JSON */ }
  if (result.ok) {
    page.cart.paid = {
      orderId: body?.id ?? null, key: result.key, attempts: page.attempt,
      totalCents: body?.totalCents ?? cartTotalCents(), currency: body?.currency ?? "EUR",
    };
    saveCart();
    log(`paid: order ${body?.id} (${result.status}${result.replayed ? ", replayed" : ""})`);
    // The attempts the page shows count every request with this key, across reloads and "Try again".
    const attempts = page.attempt ?? result.attempts;
    const how = page.reconciled === result.key && result.replayed
      ? "Every answer was lost on the way, so the page asked the server what became of its key and found this order: nothing was charged twice."
      : result.replayed
      ? "An earlier request with this key (before a reload, or from another tab) had already reached the server, which replayed its answer: nothing was charged twice."
      : `Confirmed after ${attempts} ${attempts === 1 ? "attempt" : "attempts"}.`;
    page.resuming = false;
    setPhase("paid", `Paid: order ${body?.id ?? ""} for ${money(page.cart.paid.totalCents, page.cart.paid.currency)}`,
      `${how} Start a new cart for another order.`);
  } else {
    // A definite failure: the key is retired; fixing the cart and paying again makes a new intent.
    await page.client.discard(intentId()).catch(() => {});
    log(`declined: ${result.status} ${body?.code ?? ""}`);
    page.resuming = false;
    setPhase("failed", `Payment declined (${result.status})`,
      `${body?.detail ?? "The server refused this order."} Change the cart and pay again.`);
  }
}

function failedToConfirm(error) {
  const code = isIdempotentFetchError(error) ? error.code : null;
  log(`send ended: ${code ?? error}`);
  if (code === "RETRIES_EXHAUSTED" || code === "ABORTED") {
    const attempts = page.attempt ?? error.attempts;
    const why = code === "ABORTED" ? "You stopped the retries."
      : `Gave up after ${attempts} ${attempts === 1 ? "attempt" : "attempts"}` +
        (error.lastStatus ? ` (last answer ${error.lastStatus}).` : " (no answer from the server).");
    setPhase("gaveup", "Payment not confirmed yet",
      `${why} The payment may or may not have gone through. “Try again” re-sends the same key ` +
      `(${shortKey(error.key ?? page.key)}), so it can never be charged twice.`);
  } else if (code === "EXPIRED") {
    setPhase("expired", "This payment's key has expired",
      "It is too old to re-send safely. Check the orders list below to see whether it went through, then start a new cart.");
  } else if (code === "KEY_MISMATCH") {
    page.client.discard(intentId()).catch(() => {});
    setPhase("failed", "The server rejected the key", "It was already used for a different request. Pay again to use a new key.");
  } else {
    showError(error, "Payment stopped");
  }
}

function showError(error, title) {
  const message = error?.message ?? String(error);
  log(`${title}: ${message}`);
  setPhase(page.key ? "gaveup" : "idle", title, message);
}

async function tryAgain() {
  if (!page.op) return;
  page.resuming = false;
  await send(page.op);
}

async function startNewCart() {
  if (BUSY.has(page.phase)) return;
  if (page.phase === "gaveup" || page.phase === "expired") {
    const ok = confirm("The last payment was never confirmed. Forget it and start a new cart?");
    if (!ok) return;
    await page.client.discard(intentId()).catch(() => {});
  }
  page.cart = newCart();
  saveCart();
  resetIntentView();
  log(`new cart ${page.cart.id}`);
  setPhase("idle", "Ready to pay", "Choose quantities, then Pay.");
  refreshOrders();
  refreshTrace();
}

function resetIntentView() {
  page.op = null;
  page.key = null;
  page.attempt = null;
  page.resuming = false;
}

/** After a load: paid cart, pending intent to resume, or a fresh start. */
async function restore() {
  if (page.cart.paid) {
    page.key = page.cart.paid.key;
    page.attempt = page.cart.paid.attempts ?? null;
    setPhase("paid", `Paid: order ${page.cart.paid.orderId ?? ""} for ${money(page.cart.paid.totalCents, page.cart.paid.currency)}`,
      "Start a new cart for another order.");
    return;
  }
  if (BACKGROUND && await paidInTheBackground()) return;
  let pending = [];
  try { pending = await page.client.pending(); } catch (error) { log(`could not list pending intents: ${error.message}`); }
  const mine = pending.find((i) => i.intentId === intentId());
  if (!mine) {
    setPhase("idle", "Ready to pay", "Choose quantities, then Pay.");
    return;
  }
  page.key = mine.key;
  page.attempt = mine.attempts;
  if (mine.state === "expired") {
    setPhase("expired", "This payment's key has expired",
      "It is too old to re-send safely. Check the orders list below to see whether it went through, then start a new cart.");
    return;
  }
  let op;
  try {
    op = await page.client.begin(intentId(), orderRequest());
  } catch (error) {
    showError(error, "Could not resume the payment");
    return;
  }
  page.resuming = true;
  log(`found unfinished payment ${mine.intentId} (key ${mine.key}, ${mine.attempts} attempts so far)`);
  await send(op);
}

/** With ?background=1: the cart's intent succeeded while no tab of it was open (the service worker
 *  sent it): the cart is marked paid with the order the server made with its key. */
async function paidInTheBackground() {
  let info = null;
  try { info = await page.client.intent(intentId()); } catch (error) { log(`could not read the intent: ${error.message}`); }
  if (info?.state !== "succeeded") return false;
  let order = null;
  try {
    const response = await fetch("/api/orders", { cache: "no-store" });
    if (response.ok) order = (await response.json()).orders.find((o) => o.idempotencyKey === info.key) ?? null;
  } catch { /* the order id is shown once the orders list loads */ }
  page.cart.paid = {
    orderId: order?.id ?? null, key: info.key, attempts: info.attempts,
    totalCents: order?.totalCents ?? cartTotalCents(), currency: order?.currency ?? "EUR",
  };
  saveCart();
  page.key = info.key;
  page.attempt = info.attempts;
  log(`paid in the background: key ${shortKey(info.key)}, ${info.attempts} attempts`);
  setPhase("paid", `Paid in the background: order ${order?.id ?? ""} for ${money(page.cart.paid.totalCents, page.cart.paid.currency)}`,
    `This tab was closed before the server answered. The service worker re-sent the same key (${shortKey(info.key)}) ` +
    "once the server was back, and the server made one order. Start a new cart for another order.");
  return true;
}

// ---------------------------------------------------------------- orders on the server

let ordersInFlight = false;
async function refreshOrders() {
  // Before the session exists the server could only answer 401.
  if (ordersInFlight || !sessionStarted) return;
  ordersInFlight = true;
  try {
    const response = await fetch("/api/orders", { cache: "no-store" });
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    const { orders } = await response.json();
    renderOrders(orders);
  } catch {
    el.ordersSummary.textContent = navigator.onLine ? "Could not load the orders." : "Offline: orders will refresh when the connection is back.";
  } finally {
    ordersInFlight = false;
  }
}

function renderOrders(orders) {
  const currentKey = page.key;
  const names = new Map(page.products.map((p) => [p.sku, p.name]));
  const rows = orders.map((o) => {
    const tr = document.createElement("tr");
    tr.innerHTML = `<td><code></code></td><td><code class="key"></code></td><td></td><td class="num"></td><td></td><td><code class="charge"></code></td><td class="confirmation"></td>`;
    tr.children[0].firstChild.textContent = o.id;
    tr.children[1].firstChild.textContent = o.idempotencyKey;
    tr.children[2].textContent = o.items.map((i) => `${i.qty} × ${i.name ?? names.get(i.sku) ?? i.sku}`).join(", ");
    tr.children[3].textContent = money(o.totalCents, o.currency);
    tr.children[4].textContent = new Date(o.createdAt * 1000).toLocaleTimeString("en-GB", { hour12: false });
    // The charge at the payment provider and the confirmation in the outbox (the server runs the order
    // flow through them in the demo): one of each per order, whatever crashed on the way.
    tr.children[5].firstChild.textContent = o.chargeId ?? "–";
    const confirmation = o.confirmation;
    tr.children[6].textContent = confirmation
      ? `${confirmation.id} (${confirmation.deliveredAt ? "delivered" : "in the outbox"})`
      : "–";
    if (currentKey && o.idempotencyKey === currentKey) {
      tr.classList.add("mine");
      tr.title = "Made by this payment's key";
    }
    return tr;
  });
  if (rows.length === 0) {
    const tr = document.createElement("tr");
    tr.innerHTML = `<td colspan="7" class="muted">No orders yet.</td>`;
    rows.push(tr);
  }
  el.orders.replaceChildren(...rows);
  const same = currentKey ? orders.filter((o) => o.idempotencyKey === currentKey).length : 0;
  const count = `${orders.length} ${orders.length === 1 ? "order" : "orders"} for account ${sessionAccount}`;
  el.ordersSummary.textContent = currentKey
    ? `${count}; ${same} with this payment's key${same === 1 ? ": one click, one order." : "."}`
    : `${count}.`;
}

// ---------------------------------------------------------------- trace (only with ?traces=URL)

/** The timeline module (www/timeline.js), once tracing started. */
let timeline = null;
let traceInFlight = false;

/** Loads the tracing bundle (www/tracing.js) and the timeline; the client's observer. */
async function startTracing() {
  const [tracing, drawing] = await Promise.all([import("/tracing.js"), import("/timeline.js")]);
  timeline = drawing;
  el.traceCard.hidden = false;
  return tracing.startTracing(TRACES, (intent, traceId) => {
    const traces = readStored(TRACE_IDS_STORAGE_KEY) ?? {};
    if (traces[intent] === traceId) return;
    traces[intent] = traceId;
    writeStored(TRACE_IDS_STORAGE_KEY, traces);
  }).observer;
}

/** Draws the trace of the current cart's intent, as the receiver has it now. */
async function refreshTrace() {
  if (!timeline || traceInFlight || !page.cart) return;
  const traceId = (readStored(TRACE_IDS_STORAGE_KEY) ?? {})[intentId()];
  if (!traceId) {
    el.traceSummary.textContent = "No payment traced yet: Pay, and its spans show here.";
    el.timeline.replaceChildren();
    return;
  }
  traceInFlight = true;
  try {
    const response = await fetch(`${TRACES}/traces/${traceId}`, { cache: "no-store" });
    if (response.status === 404) {
      el.traceSummary.textContent = `Trace ${traceId}: no span received yet.`;
      return;
    }
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    const { counts, durationMs } = timeline.drawTimeline(el.timeline, await response.json());
    const n = (role, one, many = `${one}s`) => `${counts[role] ?? 0} ${(counts[role] ?? 0) === 1 ? one : many}`;
    el.traceSummary.textContent = `Trace ${traceId} (${Math.round(durationMs)} ms): ${n("intent", "intent")}, ` +
      `${n("attempt", "attempt")}, ${n("request", "server request")}, ${n("phase", "phase")}, ` +
      `${n("provider-call", "provider call")}, ${n("provider", "provider span")}, ${n("completion", "completion")}, ` +
      `${n("delivery", "delivery", "deliveries")}, ${n("receipt", "receipt")}.`;
  } catch (error) {
    el.traceSummary.textContent = `Could not load the trace from ${TRACES} (${error.message}).`;
  } finally {
    traceInFlight = false;
  }
}

// ---------------------------------------------------------------- faults

const FAULT_FIELDS = ["failBeforeWork", "dropAfterCommit", "status429", "latencyProbability", "latencyMs", "retryAfterSecs"];
// Presets compare on these too; the crash switch has no slider (it ends the server process: the demo
// command restarts it, with every fault off again).
const PRESET_FIELDS = [...FAULT_FIELDS, "crashAfterCharge"];
const PRESETS = {
  off: { failBeforeWork: 0, dropAfterCommit: 0, status429: 0, latencyMs: 0, latencyProbability: 0, retryAfterSecs: 1 },
  flaky: { failBeforeWork: 0.3, dropAfterCommit: 0.3, status429: 0.1, latencyMs: 0, latencyProbability: 0, retryAfterSecs: 1 },
  lost: { failBeforeWork: 0, dropAfterCommit: 0.7, status429: 0, latencyMs: 0, latencyProbability: 0, retryAfterSecs: 1 },
  down: { failBeforeWork: 1, dropAfterCommit: 0, status429: 0, latencyMs: 0, latencyProbability: 0, retryAfterSecs: 1 },
  slow: { failBeforeWork: 0, dropAfterCommit: 0, status429: 0, latencyMs: 3000, latencyProbability: 0.5, retryAfterSecs: 1 },
  crash: { failBeforeWork: 0, dropAfterCommit: 0, status429: 0, latencyMs: 0, latencyProbability: 0, retryAfterSecs: 1, crashAfterCharge: 1 },
};

function isProbability(name) { return !["latencyMs", "retryAfterSecs"].includes(name); }

function showFaults(config) {
  for (const name of FAULT_FIELDS) {
    const input = el.faultsForm.elements[name];
    const value = config[name] ?? 0;
    input.value = String(isProbability(name) ? Math.round(value * 100) : value);
    const out = document.getElementById(`o-${name}`);
    if (out) out.textContent = `${input.value}%`;
  }
  for (const button of document.querySelectorAll("[data-preset]")) {
    const preset = PRESETS[button.dataset.preset];
    const same = PRESET_FIELDS.every((f) => Math.abs((preset[f] ?? 0) - (config[f] ?? 0)) < 1e-9);
    button.setAttribute("aria-pressed", String(same));
  }
}

function faultsFromForm() {
  const config = {};
  for (const name of FAULT_FIELDS) {
    const n = Number(el.faultsForm.elements[name].value) || 0;
    config[name] = isProbability(name) ? n / 100 : Math.round(n);
  }
  return config;
}

async function putFaults(config, label) {
  el.faultsStatus.textContent = "Applying…";
  try {
    const response = await fetch("/api/faults", {
      method: "PUT", headers: { "content-type": "application/json" }, body: JSON.stringify(config),
    });
    const body = await response.json();
    if (!response.ok) throw new Error(body.detail ?? `HTTP ${response.status}`);
    showFaults(body);
    el.faultsStatus.textContent = `${label} applied.`;
    log(`server faults: ${label}`);
  } catch (error) {
    el.faultsStatus.textContent = `Could not change the faults: ${error.message}`;
  }
}

async function loadFaults() {
  try {
    const response = await fetch("/api/faults", { cache: "no-store" });
    if (response.ok) showFaults(await response.json());
  } catch { /* the panel keeps its defaults */ }
}

// ---------------------------------------------------------------- wiring

function wire() {
  el.pay.addEventListener("click", pay);
  el.tryAgain.addEventListener("click", tryAgain);
  el.cancel.addEventListener("click", () => page.abort?.abort());
  el.newCart.addEventListener("click", startNewCart);
  el.refreshOrders.addEventListener("click", refreshOrders);
  el.cartLines.addEventListener("click", (event) => {
    const button = event.target.closest("button.step");
    if (!button) return;
    const sku = button.closest("tr").dataset.sku;
    setQty(sku, (page.cart.items[sku] ?? 0) + Number(button.dataset.step));
  });
  el.cartLines.addEventListener("change", (event) => {
    if (event.target.matches("input")) setQty(event.target.closest("tr").dataset.sku, event.target.value);
  });
  for (const button of document.querySelectorAll("[data-preset]")) {
    button.addEventListener("click", () => putFaults(PRESETS[button.dataset.preset], `“${button.textContent}”`));
  }
  el.faultsForm.addEventListener("input", (event) => {
    const out = document.getElementById(`o-${event.target.name}`);
    if (out) out.textContent = `${event.target.value}%`;
  });
  el.faultsForm.addEventListener("submit", (event) => {
    event.preventDefault();
    putFaults(faultsFromForm(), "Custom faults");
  });
  const online = () => { el.offlineBanner.hidden = navigator.onLine; if (navigator.onLine) refreshOrders(); };
  addEventListener("online", online);
  addEventListener("offline", online);
  online();
  // Another tab changed this account's cart (new cart, quantities, paid): follow it unless we are sending.
  addEventListener("storage", (event) => {
    if (event.key !== CART_STORAGE_KEY || BUSY.has(page.phase)) return;
    const cart = readStored(CART_STORAGE_KEY);
    if (!cart || typeof cart.id !== "string") return;
    const sameCart = cart.id === page.cart.id;
    page.cart = cart;
    if (cart.paid) {
      page.key = cart.paid.key;
      page.attempt = cart.paid.attempts ?? null;
      setPhase("paid", `Paid: order ${cart.paid.orderId ?? ""} for ${money(cart.paid.totalCents, cart.paid.currency)}`,
        "Paid in another tab. Start a new cart for another order.");
    } else if (!sameCart) {
      resetIntentView();
      setPhase("idle", "Ready to pay", "Another tab started a new cart.");
    } else {
      render();
    }
  });
  setInterval(() => {
    if (document.hidden) return;
    refreshOrders();
    refreshTrace();
  }, ORDERS_REFRESH_MS);
}

function retryPolicy() {
  const attempts = Number(params.get("attempts"));
  const retry = FAST
    ? { baseDelayMs: 100, maxDelayMs: 1000, maxAttempts: 60, totalTimeoutMs: 60000, attemptTimeoutMs: 5000, maxRetryAfterMs: 1000 }
    : {};
  if (Number.isInteger(attempts) && attempts >= 1 && attempts <= 1000) retry.maxAttempts = attempts;
  return Object.keys(retry).length ? retry : undefined;
}

function showStorageFallback(reason) {
  el.storageBanner.hidden = false;
  el.storageBanner.textContent = `This browser does not let the page keep data (${reason}). Payments still retry ` +
    "safely while this tab stays open, but a reload would lose the payment's key: keep the tab open until it is confirmed.";
}

/** Starts the server session: an HttpOnly cookie the browser then sends with every /api request. */
async function startSession() {
  const response = await fetch("/api/session", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(params.has("account") ? { account: ACCOUNT } : {}),
  });
  if (!response.ok) throw new Error(`HTTP ${response.status}`);
  return (await response.json()).accountId;
}

async function main() {
  el.accountId.textContent = ACCOUNT;
  wire();
  try {
    // No init needed: the client's first operation waits for the wasm. Awaiting `ready` here only
    // lets the page say "unavailable" at once when the library cannot load.
    await ready;
    const retry = retryPolicy();
    const observer = TRACES ? await startTracing() : undefined;
    // The server answers the key-status protocol: where a send would give up with a key it cannot
    // explain (every answer lost, an expired key), the client asks it what became of the key.
    page.client = new IdempotentClient({
      namespace: ACCOUNT, statusUrl: "/api/idempotency-keys/{key}", ...(retry ? { retry } : {}),
      ...(observer ? { observer } : {}),
      // The service worker reads the intents from IndexedDB (it has no localStorage).
      ...(BACKGROUND ? { storage: "indexeddb" } : {}),
    });
    if (BACKGROUND) {
      // The worker's client takes the page's namespace and retry policy from its URL.
      const query = new URLSearchParams({ account: ACCOUNT, ...(FAST ? { fast: "1" } : {}) });
      navigator.serviceWorker?.register(`/sw.js?${query}`, { type: "module" }).catch((error) => log(`service worker: ${error.message}`));
    }
  } catch (error) {
    el.loadError.hidden = false;
    el.loadError.textContent = `The payment library did not load: ${error.message ?? error}`;
    setPhase("loading", "Unavailable", "Reload the page to try again.");
    return;
  }
  page.client.addEventListener("storagefallback", (e) => showStorageFallback(e.reason));
  if (page.client.storageFallback) showStorageFallback(page.client.storageFallback);
  page.client.addEventListener("reconcile", (e) => {
    page.reconciled = e.key;
    log(`asking the server what became of key ${shortKey(e.key)}`);
  });
  page.client.addEventListener("offline", () => {
    log("offline: waiting for the network before the next attempt");
    setPhase("offline", "You are offline: waiting for the connection",
      resumingNote() + "The payment continues with the same key as soon as the network is back.");
  });

  try {
    sessionAccount = await startSession();
    sessionStarted = true;
    el.accountId.textContent = sessionAccount;
  } catch (error) {
    el.loadError.hidden = false;
    el.loadError.textContent = `Could not start a session (${error.message}). Reload the page to try again.`;
    setPhase("loading", "Unavailable", "");
    return;
  }

  try {
    const response = await fetch("/api/products");
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    page.products = (await response.json()).products;
  } catch (error) {
    el.loadError.hidden = false;
    el.loadError.textContent = `Could not load the products (${error.message}). Reload the page to try again.`;
    setPhase("loading", "Unavailable", "");
    return;
  }

  const stored = readStored(CART_STORAGE_KEY);
  page.cart = stored && typeof stored.id === "string" && stored.items ? stored : newCart();
  saveCart();
  loadFaults();
  refreshOrders();
  refreshTrace();
  await restore();
}

main();
