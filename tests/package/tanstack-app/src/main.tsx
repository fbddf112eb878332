import { StrictMode } from 'react'
import { createRoot } from 'react-dom/client'
import { QueryClient } from '@tanstack/react-query'
import { PersistQueryClientProvider } from '@tanstack/react-query-persist-client'
import { createSyncStoragePersister } from '@tanstack/query-sync-storage-persister'
import { idempotentMutation } from 'idempotent-fetch-client/tanstack'
import App, { checkout } from './App.tsx'

// TanStack Query persisted in localStorage: a mutation paused (offline) when the page closed is
// resumed after the reload, and finds its function here by its key.
const queryClient = new QueryClient()
queryClient.setMutationDefaults(['checkout'], idempotentMutation(checkout))
const persister = createSyncStoragePersister({ storage: window.localStorage })

createRoot(document.getElementById('root')!).render(
  <StrictMode>
    <PersistQueryClientProvider client={queryClient} persistOptions={{ persister }} onSuccess={() => queryClient.resumePausedMutations()}>
      <App />
    </PersistQueryClientProvider>
  </StrictMode>,
)
