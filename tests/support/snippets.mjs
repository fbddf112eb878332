// The npm page's framework snippets as a user pastes them, for tests/js/package.test.mjs.
//
//   readSnippets(markdown)   the fenced blocks of the npm page (package/npm-README.md) under
//                            "### shop.ts", "### React", "### Vue", "### Svelte", "### TanStack
//                            Query": { shop, react, vue, svelte, tanstack }, each the code verbatim
//   snippetApp(template, dir, files)
//                            a copy of the template app `template` (tests/package/<name>-app) in
//                            `dir`, without its node_modules and build output, its node_modules a
//                            folder of links to the template's packages (so the template's own
//                            `npm run build` runs there with its pinned tools, while its caches and
//                            build info stay in the copy), with `files` ({ "src/App.tsx": text })
//                            written over it
//   HARNESS                  what mounts a snippet in each template: the cart from the URL
//                            (?qty=, ?sku=), shown on the page, and the snippet's component below it.
//                            Not the README's code: the page around it, as an app would have.
import { cpSync, mkdirSync, readdirSync, symlinkSync, writeFileSync } from "node:fs";
import path from "node:path";

const HEADINGS = { shop: "shop.ts", react: "React", vue: "Vue", svelte: "Svelte", tanstack: "TanStack Query" };

export function readSnippets(markdown) {
  const out = {};
  for (const [name, heading] of Object.entries(HEADINGS)) {
    const at = markdown.indexOf(`\n### ${heading}\n`);
    if (at < 0) throw new Error(`the npm page has no "### ${heading}" section`);
    const block = /\n```[a-z]*\n([\s\S]*?)\n```\n/.exec(markdown.slice(at));
    if (!block) throw new Error(`no code block under "### ${heading}"`);
    out[name] = `${block[1]}\n`;
  }
  return out;
}

export function snippetApp(template, dir, files) {
  cpSync(template, dir, { recursive: true, filter: (source) => !/[/\\](node_modules|dist)$/.test(source) });
  const modules = path.join(template, "node_modules");
  mkdirSync(path.join(dir, "node_modules"));
  // `.tmp` (tsc -b's build info) and `.vite` (Vite's cache) belong to the app that builds, not the template.
  for (const entry of readdirSync(modules)) {
    if (entry === ".tmp" || entry === ".vite") continue;
    symlinkSync(path.join(modules, entry), path.join(dir, "node_modules", entry));
  }
  for (const [file, text] of Object.entries(files)) writeFileSync(path.join(dir, file), text);
  return dir;
}

const CART = `const params = new URLSearchParams(location.search)
const sku = params.get('sku') ?? 'mug'
const qty = Number(params.get('qty') ?? 2)
const cart: Cart = { id: 'cart-42', items: [{ sku, qty }] }`;

const reactApp = `import { PayButton } from './PayButton'
import type { Cart } from './shop'

${CART}

export default function App() {
  return (
    <main>
      <h1>Checkout</h1>
      <p id="cart">Your cart: {qty} × {sku}</p>
      <PayButton cart={cart} />
    </main>
  )
}
`;

export const HARNESS = {
  react: { component: "src/PayButton.tsx", files: { "src/App.tsx": reactApp } },
  tanstack: {
    component: "src/PayButton.tsx",
    files: {
      "src/App.tsx": reactApp,
      "src/main.tsx": `import { StrictMode } from 'react'
import { createRoot } from 'react-dom/client'
import { QueryClient, QueryClientProvider } from '@tanstack/react-query'
import App from './App.tsx'

createRoot(document.getElementById('root')!).render(
  <StrictMode>
    <QueryClientProvider client={new QueryClient()}>
      <App />
    </QueryClientProvider>
  </StrictMode>,
)
`,
    },
  },
  vue: {
    component: "src/PayButton.vue",
    files: {
      "src/App.vue": `<script setup lang="ts">
import PayButton from './PayButton.vue'
import type { Cart } from './shop'

${CART}
</script>

<template>
  <main>
    <h1>Checkout</h1>
    <p id="cart">Your cart: {{ qty }} × {{ sku }}</p>
    <PayButton :cart="cart" />
  </main>
</template>
`,
    },
  },
  svelte: {
    component: "src/PayButton.svelte",
    files: {
      "src/App.svelte": `<script lang="ts">
  import PayButton from './PayButton.svelte'
  import type { Cart } from './shop'

  ${CART.replaceAll("\n", "\n  ")}
</script>

<main>
  <h1>Checkout</h1>
  <p id="cart">Your cart: {qty} × {sku}</p>
  <PayButton {cart} />
</main>
`,
    },
  },
};
