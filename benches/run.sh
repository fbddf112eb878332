#!/usr/bin/env bash
# Every benchmark, one after the other (what `cargo xtask bench` runs). Pass --quick for fewer runs.
# Prints figures; never fails on them. See BENCHMARKS.md for what each one measures.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=()
[[ "${1:-}" == "--quick" ]] && quick=(--quick)

echo "== 1. backoff simulation"
cargo run --quiet --release --manifest-path benches/backoff-sim/Cargo.toml -- "${quick[@]}"
echo
echo "== 2. what ships (builds pkg/: node package/build.mjs)"
node benches/size.mjs
echo
echo "== 3. overhead per request in headless Chromium (no debugger attached)"
node benches/overhead.mjs "${quick[@]}"
echo
echo "== 3b. start-up from navigation, next to ky and a bare page (no debugger attached)"
node benches/startup.mjs --preload "${quick[@]}"
echo
echo "== 5. growth: a long history in one page, then fresh loads (100,000 intents per storage: 15-25 min each; --quick 5,000)"
node benches/growth.mjs "${quick[@]}"
