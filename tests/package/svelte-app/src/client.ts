import { IdempotentClient } from 'idempotent-fetch-client'

// One client for the page, made once; one namespace per signed-in account. statusUrl lets a reload
// that rebuilt another cart ask the server about the old key (onMismatch: 'replace').
export const client = new IdempotentClient({
  namespace: 'acct_svelte',
  statusUrl: '/api/idempotency-keys/{key}',
  retry: { baseDelayMs: 200, maxDelayMs: 1000, maxAttempts: 60 },
})
