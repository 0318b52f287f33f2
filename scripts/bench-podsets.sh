#!/usr/bin/env bash
# scripts/bench-podsets.sh — owns: running the StrimziPodSet controller benchmark (not a test)
# against the real environment: a release kstretch-agent, 100 podsets x 10 pods in one cluster,
# idle RSS, then pod deletions and the time until each replacement is Ready (p50/p99) and the
# agent's RSS under that churn. Figures are recorded in docs/benchmarks.md.
#
# The benchmark's pods run on three nodes of its own, played by its own kwok built from the
# environment's kwok version with one fix: kwok v0.8.0 deletes a terminating pod by name
# without a UID precondition, so when its queue lags it deletes the replacement that a fast
# controller has already created under the same name (a real kubelet never does). Under churn
# that turns into a kill/recreate storm that measures kwok, not the agent. BENCH_SHARED_KWOK=1
# runs on the environment's shared nodes and kwok instead, to see that.
#
# Extra arguments go to the benchmark (e.g. --deletions 400 --batch 50).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tests/env/versions.sh
. tests/env/versions.sh
state=${KSTRETCH_STATE_DIR:-$HOME/.local/state/kstretch}
[[ -f $state/env ]] || tests/env/up.sh

kwok_args=()
if [[ ${BENCH_SHARED_KWOK:-0} != 1 ]]; then
  kwok_dir=$KSTRETCH_CACHE/kwok-$KSTRETCH_KWOK_VERSION-uid-precondition
  if [[ ! -x $kwok_dir/kwok ]]; then
    echo "[bench] building kwok $KSTRETCH_KWOK_VERSION with a UID precondition on pod deletion" >&2
    src=$(go mod download -json "sigs.k8s.io/kwok@$KSTRETCH_KWOK_VERSION" |
      sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    cp -r "$src/." "$work/src"
    chmod -R u+w "$work/src"
    file=$work/src/pkg/kwok/controllers/pod_controller.go
    old='err := c.typedClient.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, deleteOpt)'
    grep -qF "$old" "$file" || { echo "[bench] kwok's pod deletion changed; update this patch" >&2; exit 1; }
    sed -i "s|$old|opts := deleteOpt\n\topts.Preconditions = metav1.NewUIDPreconditions(string(pod.UID))\n\terr := c.typedClient.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, opts)|" "$file"
    (cd "$work/src" && GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" -o "$work/kwok" ./cmd/kwok)
    mkdir -p "$kwok_dir"
    mv "$work/kwok" "$kwok_dir/kwok"
  fi
  kwok_args=(--kwok "$kwok_dir/kwok" --kwok-stages "$KSTRETCH_CACHE/kwok-$KSTRETCH_KWOK_VERSION/stages")
fi

cargo build --release -p kstretch-agent
cargo build --release -p kstretch-bench --bin bench_podsets
target=${CARGO_TARGET_DIR:-target}
exec "$target/release/bench_podsets" --agent "$target/release/kstretch-agent" "${kwok_args[@]}" "$@"
