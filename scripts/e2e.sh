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
# Runs binary $1 with the arguments after it, labelled $label (default: the binary's name).
run() {
  local name=$1 t=$SECONDS label=${label:-$1}
  shift
  echo "--- e2e $label"
  # Cargo runs test binaries from the package's directory; so do we.
  if (cd tests && "${exe[$name]}" "$@"); then
    echo "--- e2e $label ok in $((SECONDS - t))s"
  else
    echo "--- e2e $label FAILED after $((SECONDS - t))s"
    failed+=("$label")
  fi
}
# Runs each test of binary $1 (those `--list` names with the arguments after it, e.g.
# `--ignored cluster_lost_`) as a process of its own, so each one's time is printed; with
# arguments of the caller (a filter), the binary runs once instead.
run_each() {
  local name=$1 test
  shift
  if ((${#args[@]})); then
    run "$name" "$@" "${args[@]}"
    return
  fi
  local listed ignored=""
  listed=$(cd tests && "${exe[$name]}" --list --format terse "$@" | sed -n 's/: test$//p')
  # `--list` names ignored tests too; without --ignored they are not run.
  [[ " $* " == *" --ignored "* ]] ||
    ignored=$(cd tests && "${exe[$name]}" --list --format terse --ignored | sed -n 's/: test$//p')
  for test in $listed; do
    [[ $'\n'$ignored$'\n' == *$'\n'$test$'\n'* ]] && continue
    label="$name::$test" run "$name" "$@" --exact "$test"
  done
}
special() {
  [[ $1 == "$BACKGROUND" || " ${ALONE[*]} ${BESIDE_ALONE[*]} ${HEAVY[*]} " == *" $1 "* ]]
}

# Runs the binaries $2... in the background, their output kept for the end; the caller waits
# for the pid in $background and calls collect.
log=$(mktemp -t kstretch-e2e-background.XXXXXX)
in_background() {
  (failed=(); "$@" >"$log" 2>&1; echo "${failed[*]}" >"$log.failed") &
  background=$!
}
run_all() {
  local name
  for name in "$@"; do run "$name" "${args[@]}"; done
}
collect() {
  wait "$background" || true
  cat "$log"
  read -r -a background_failed <"$log.failed" || true
  failed+=("${background_failed[@]}")
}
args=("$@")

in_background run_all "${BESIDE_ALONE[@]}"
for name in "${ALONE[@]}"; do
  run "$name" "$@"
done
collect

in_background run_each "$BACKGROUND"
for name in $(printf '%s\n' "${!exe[@]}" | sort); do
  special "$name" || run "$name" "$@"
done
for name in "${HEAVY[@]}"; do
  run "$name" "$@"
done
collect
rm -f "$log" "$log.failed"
if (($# == 0)); then
  run_each "$BACKGROUND" "${LAST[@]}"
fi

if ((${#failed[@]})); then
  echo "e2e: FAILED: ${failed[*]}"
  exit 1
fi
