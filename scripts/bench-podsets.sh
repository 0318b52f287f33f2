#!/usr/bin/env bash
# scripts/bench-podsets.sh — owns: running the StrimziPodSet controller benchmark (not a test)
# against the real environment: a release kstretch-agent, 100 podsets x 10 pods in one cluster,
# idle RSS, then pod deletions and the time until each replacement is Ready (p50/p99) and the
# agent's RSS under that churn. Extra arguments go to the benchmark (e.g. --deletions 400).
# Figures are recorded in docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."
state=${KSTRETCH_STATE_DIR:-$HOME/.local/state/kstretch}
[[ -f $state/env ]] || tests/env/up.sh
cargo build --release -p kstretch-agent
cargo build --release -p kstretch-tests --bin bench_podsets
target=${CARGO_TARGET_DIR:-target}
exec "$target/release/bench_podsets" --agent "$target/release/kstretch-agent" "$@"
