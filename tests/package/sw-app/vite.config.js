// The README's recipe ("Background completion", "In a Vite app"): the service worker is a second
// entry, kept at a stable URL at the root (its scope is the whole app). Only a build has that entry:
// `vite dev` answers /sw.js with index.html, so the app is tried with `vite build && vite preview`,
// the API proxied as a dev server would proxy it (API_ORIGIN: the test's server).
import { defineConfig } from "vite";

export default defineConfig({
  build: {
    rollupOptions: {
      input: { main: "index.html", sw: "src/sw.js" },
      output: { entryFileNames: (chunk) => (chunk.name === "sw" ? "sw.js" : "assets/[name]-[hash].js") },
    },
  },
  preview: { proxy: { "/api": process.env.API_ORIGIN ?? "http://127.0.0.1:8080" } },
});
