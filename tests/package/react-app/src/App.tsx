// A checkout written with idempotent-fetch-client/react: one click is one order, through retries, a reload
// mid-retry ("resumed": the same key), a reload that rebuilt another cart (onMismatch: 'replace') and
// after the answer ("already paid"). The data-* attributes on
// <body> are what tests/js/package.test.mjs reads; an app would not need them.
import { useEffect } from 'react'
import { IdempotentClient } from 'idempotent-fetch-client'
import { useIdempotentAction } from 'idempotent-fetch-client/react'

// One client for the page, made outside the component; one namespace per signed-in account.
// statusUrl lets a reload that rebuilt another cart ask the server about the old key.
const client = new IdempotentClient({
  namespace: 'acct_react',
  statusUrl: '/api/idempotency-keys/{key}',
  retry: { baseDelayMs: 200, maxDelayMs: 1000, maxAttempts: 60 },
})

// The cart as this page load builds it (the test changes it across a reload with ?qty=).
const qty = Number(new URLSearchParams(location.search).get('qty') ?? 2)
const cart = { items: [{ sku: 'mug', qty }] }

interface Order {
  id: string
}

export default function App() {
  const pay = useIdempotentAction<Order>('checkout:cart-42', {
    url: '/api/orders',
    method: 'POST',
    headers: { 'content-type': 'application/json' }, // the account: the page's session cookie
    body: JSON.stringify(cart),
  }, { client, onMismatch: 'replace' })

  const status = (() => {
    switch (pay.phase) {
      case 'checking': return 'Loading…'
      case 'idle': return 'Ready'
      case 'sending': return pay.attempt > 1 ? `Sending (attempt ${pay.attempt})…` : 'Sending…'
      case 'retrying': return `Retrying in ${Math.ceil((pay.retryInMs ?? 0) / 1000)} s (${pay.retryReason})`
      case 'offline': return 'Offline: waiting for the network'
      case 'succeeded': return pay.data ? `Paid: order ${pay.data.id}` : 'Already paid'
      case 'failed': return `Problem (${pay.result?.status ?? 'answered before'})`
      case 'error': return pay.errorCode === 'RETRIES_EXHAUSTED' ? 'No answer yet. Try again.' : `Error: ${pay.error?.message}`
    }
  })()

  // For the test: what the page shows, as attributes.
  useEffect(() => {
    const data = document.body.dataset
    data.ready = String(pay.phase !== 'checking')
    data.phase = pay.phase
    data.key = pay.key ?? ''
    data.orderId = pay.data?.id ?? ''
    data.alreadyAnswered = String(pay.alreadyAnswered)
    data.result = pay.phase === 'succeeded' ? 'paid' : pay.phase === 'error' && pay.errorCode === 'RETRIES_EXHAUSTED' ? 'try-again' : pay.phase === 'failed' || pay.phase === 'error' ? 'problem' : 'pending'
  })

  const busy = pay.phase === 'checking' || pay.phase === 'sending' || pay.phase === 'retrying' || pay.phase === 'offline'
  return (
    <main>
      <h1>Checkout</h1>
      <p>{qty} × Enamel mug</p>
      {pay.phase !== 'succeeded' && (
        <button id="pay" disabled={busy} onClick={pay.run}>{pay.phase === 'error' ? 'Try again' : 'Pay'}</button>
      )}
      <p id="status" role="status">{status}</p>
    </main>
  )
}
