#!/usr/bin/env bash
# scripts/e2e.sh — owns: running the end-to-end test binaries (what `make test`'s e2e step
# does), in three phases:
#   1. the binaries that change what every test in the clusters relies on (`absent` deletes
#      and reinstalls the CRDs, which deletes every Kafka in the cluster), with the ones that
#      do not use the clusters at all (`kraft_boot` boots Kafka on this machine) beside them;
#   2. the real-pod tests (`running`), which mostly wait for JVMs in pods, in the background,
#      while the light binaries (kwok pods, central and agents as processes) run one by one,
#      and then the ones that boot Kafka clusters on this machine (`kafka_nodes` against the
#      clusters, `quorum_recovery` alone);
#   3. alone and last, the real-pod tests that lose a whole cluster (`tests/env/lose.sh`) and
#      bring it back at their end (ignored by a plain `cargo test`, for that reason).
# Arguments go to every test binary (e.g. a test name filter); with arguments, phase 3 is
# left out. Every binary runs even when one
# fails; the failures are listed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

readonly ALONE=(absent)
readonly BESIDE_ALONE=(kraft_boot)
readonly BACKGROUND=running
readonly HEAVY=(kafka_nodes quorum_recovery)
readonly LAST=(--ignored cluster_lost_)

declare -A exe
while read -r name path; do
  exe[$name]=$path
done < <(cargo test -p kstretch-tests --features e2e --no-run --message-format=json-render-diagnostics |
  python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and "test" in m["target"]["kind"]:
        print(m["target"]["name"], m["executable"])
')
for name in "${ALONE[@]}" "${BESIDE_ALONE[@]}" "$BACKGROUND" "${HEAVY[@]}"; do
  [[ -n ${exe[$name]:-} ]] || { echo "e2e: no test binary named $name" >&2; exit 1; }
done

failed=()
run() {
  local name=$1 t=$SECONDS
  shift
  echo "--- e2e $name"
  # Cargo runs test binaries from the package's directory; so do we.
  if (cd tests && "${exe[$name]}" "$@"); then
    echo "--- e2e $name ok in $((SECONDS - t))s"
  else
    echo "--- e2e $name FAILED after $((SECONDS - t))s"
    failed+=("$name")
  fi
}
special() {
  [[ $1 == "$BACKGROUND" || " ${ALONE[*]} ${BESIDE_ALONE[*]} ${HEAVY[*]} " == *" $1 "* ]]
}

# Runs the binaries $2... in the background, their output kept for the end; the caller waits
# for the pid in $background and calls collect.
log=$(mktemp -t kstretch-e2e-background.XXXXXX)
in_background() {
  (failed=(); for name in "$@"; do run "$name" "${args[@]}"; done >"$log" 2>&1; echo "${failed[*]}" >"$log.failed") &
  background=$!
}
collect() {
  wait "$background" || true
  cat "$log"
  read -r -a background_failed <"$log.failed" || true
  failed+=("${background_failed[@]}")
}
args=("$@")

in_background "${BESIDE_ALONE[@]}"
for name in "${ALONE[@]}"; do
  run "$name" "$@"
done
collect

in_background "$BACKGROUND"
for name in $(printf '%s\n' "${!exe[@]}" | sort); do
  special "$name" || run "$name" "$@"
done
for name in "${HEAVY[@]}"; do
  run "$name" "$@"
done
collect
rm -f "$log" "$log.failed"
if (($# == 0)); then
  run "$BACKGROUND" "${LAST[@]}"
fi

if ((${#failed[@]})); then
  echo "e2e: FAILED: ${failed[*]}"
  exit 1
fi
