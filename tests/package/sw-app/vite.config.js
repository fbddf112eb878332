// The README's recipe ("Background completion", "In a Vite app"): the service worker is a second
// entry, kept at a stable URL at the root (its scope is the whole app).
import { defineConfig } from "vite";

export default defineConfig({
  build: {
    rollupOptions: {
      input: { main: "index.html", sw: "src/sw.js" },
      output: { entryFileNames: (chunk) => (chunk.name === "sw" ? "sw.js" : "assets/[name]-[hash].js") },
    },
  },
});
