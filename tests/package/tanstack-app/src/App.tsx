// A checkout written with TanStack Query and idempotent-fetch-client/tanstack: one click is one order,
// through the library's retries and TanStack's own (`retry: 3`), a double click, a reload mid-retry
// (the intent is found and resumed: the same key), a reload that rebuilt another cart (onMismatch:
// 'replace') and after the answer. The data-* attributes on <body> are what tests/js/package.test.mjs
// reads; an app would not need them.
import { useEffect } from 'react'
import { useMutation } from '@tanstack/react-query'
import { IdempotentClient } from 'idempotent-fetch-client'

const client = new IdempotentClient({
  namespace: 'acct_tanstack',
  statusUrl: '/api/idempotency-keys/{key}',
  retry: { baseDelayMs: 100, maxDelayMs: 300, maxAttempts: 4 },
})

interface Cart { id: string; items: { sku: string; qty: number }[] }
interface Order { id: string }

// The cart as this page load builds it (the test changes it across a reload with ?qty=).
const cart: Cart = { id: 'cart-42', items: [{ sku: 'mug', qty: Number(new URLSearchParams(location.search).get('qty') ?? 2) }] }

// What a checkout mutation is: its intent (named by the cart), its request. main.tsx registers it.
export const checkout = {
  client,
  intent: (cart: Cart) => `checkout:${cart.id}`,
  request: (cart: Cart) => ({ url: '/api/orders', method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(cart) }),
  onMismatch: 'replace' as const,
}

// For the test: every key the client sent with.
const keys = new Set<string>()
client.addEventListener('attempt', (event) => {
  keys.add(event.key)
  document.body.dataset.keys = [...keys].join(' ')
})

export default function App() {
  const pay = useMutation<Order, Error, Cart>({ mutationKey: ['checkout'], retry: 3, retryDelay: 300 })
  // A send a reload interrupted: resumed with its key, unclicked.
  useEffect(() => {
    void client.intent(checkout.intent(cart)).then((info) => {
      if (info?.state === 'pending') pay.mutate(cart)
      document.body.dataset.ready = 'true'
    })
  }, []) // eslint-disable-line react-hooks/exhaustive-deps

  const status = pay.isPending ? `Paying… (TanStack try ${pay.failureCount + 1})` : pay.isSuccess ? `Paid: order ${pay.data.id}` : pay.isError ? `No answer yet. Try again. (${pay.error.message})` : 'Ready'
  useEffect(() => {
    const data = document.body.dataset
    data.phase = pay.status
    data.failures = String(pay.failureCount)
    data.orderId = pay.data?.id ?? ''
    data.result = pay.isSuccess ? 'paid' : pay.isError ? 'try-again' : 'pending'
  })

  return (
    <main>
      <h1>Checkout</h1>
      <p>{cart.items[0].qty} × Enamel mug</p>
      {!pay.isSuccess && <button id="pay" disabled={pay.isPending} onClick={() => pay.mutate(cart)}>{pay.isError ? 'Try again' : 'Pay'}</button>}
      <p id="status" role="status">{status}</p>
    </main>
  )
}
