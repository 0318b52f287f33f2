#!/usr/bin/env bash
# scripts/e2e.sh — owns: running the end-to-end test binaries (what `make test`'s e2e step
# does), in three phases:
#   1. alone: the binaries that change what every test relies on (`absent` deletes and
#      reinstalls the CRDs, which deletes every Kafka in the cluster);
#   2. the real-pod tests (`running`), which mostly wait for JVMs in pods, in the background,
#      while the light binaries (kwok pods, central and agents as processes) run one by one;
#   3. after them, the binaries that boot private Kafka clusters on this machine (JVM-heavy).
# Arguments go to every test binary (e.g. a test name filter). Every binary runs even when one
# fails; the failures are listed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

readonly ALONE=(absent)
readonly BACKGROUND=running
readonly HEAVY=(kraft_boot kafka_nodes)

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
for name in "${ALONE[@]}" "$BACKGROUND" "${HEAVY[@]}"; do
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
  [[ $1 == "$BACKGROUND" || " ${ALONE[*]} ${HEAVY[*]} " == *" $1 "* ]]
}

for name in "${ALONE[@]}"; do
  run "$name" "$@"
done

log=$(mktemp -t kstretch-e2e-running.XXXXXX)
(failed=(); run "$BACKGROUND" "$@" >"$log" 2>&1; echo "${failed[*]}" >"$log.failed") &
background=$!
for name in $(printf '%s\n' "${!exe[@]}" | sort); do
  special "$name" || run "$name" "$@"
done
wait "$background" || true
cat "$log"
read -r -a background_failed <"$log.failed" || true
failed+=("${background_failed[@]}")
rm -f "$log" "$log.failed"

for name in "${HEAVY[@]}"; do
  run "$name" "$@"
done

if ((${#failed[@]})); then
  echo "e2e: FAILED: ${failed[*]}"
  exit 1
fi
