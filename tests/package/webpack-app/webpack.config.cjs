// webpack 5 as a new project has it: no plugins, no loaders, no `experiments`. The package's
// `new URL("./idempotent_fetch_bg.wasm", import.meta.url)` is enough for webpack to emit the wasm as an
// asset. tests/js/package.test.mjs runs `webpack(config)` with `output.path` set to a temporary folder.
const path = require("node:path");

module.exports = {
  mode: "production",
  entry: path.join(__dirname, "main.js"),
  output: { filename: "main.js", path: path.join(__dirname, "dist"), clean: true },
};
