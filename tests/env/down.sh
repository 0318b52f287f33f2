#!/usr/bin/env bash
# tests/env/down.sh — owns: stopping the kstretch test environment started by up.sh.
# Stops every process of $KSTRETCH_STATE_DIR/pids/*.pid (SIGTERM to its process group,
# up to 10 s, then SIGKILL), dependents first, removes the pidfiles and keeps the logs.
# Then makes sure nothing of ours is left: any process still carrying the state path in
# its command line and running one of our binaries (or java) is stopped too.
# --purge also deletes all state (etcd and Kafka data, PKI, configs, env file) except
# the logs; the binary cache (${KSTRETCH_CACHE:-$HOME/.cache/kstretch}) is never touched.
set -euo pipefail
LOG_TAG=down # used by log() in lib.sh
# shellcheck source=lib.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"

PURGE=0
for a in "$@"; do
  case $a in
    --purge) PURGE=1 ;;
    -h | --help)
      sed -n '2,9p' "$0"
      exit 0
      ;;
    *) die "unknown argument: $a (usage: down.sh [--purge])" ;;
  esac
done

[[ -d $STATE ]] || {
  log "nothing to do: $STATE does not exist"
  exit 0
}
if [[ -z ${KSTRETCH_LOCK_HELD:-} ]]; then
  exec 9>"$STATE/.lock"
  flock -w 900 9 || die "another up.sh/down.sh is running on $STATE"
fi

# Real nodes first: their teardown also removes what their pods leave on the machine.
"$ENV_DIR/nodes.sh" down

# Stop in reverse dependency order; names in each group are stopped in parallel.
stop_group() {
  local n pids=()
  for n in "$@"; do
    stop_proc "$n" &
    pids+=($!)
  done
  ((${#pids[@]} == 0)) || wait "${pids[@]}"
}
mkdir -p "$PID_DIR"
names=()
for f in "$PID_DIR"/*.pid; do
  [[ -e $f ]] || continue
  n=${f##*/}
  names+=("${n%.pid}")
done
if ((${#names[@]})); then
  by_suffix() {
    local s
    # shellcheck disable=SC2053 # $1 is a glob on purpose
    for s in "${names[@]}"; do [[ $s == $1 ]] && printf '%s\n' "$s"; done
    return 0
  }
  mapfile -t g1 < <(by_suffix 'connect')
  mapfile -t g2 < <(by_suffix '*-kwok'; by_suffix '*-scheduler'; by_suffix '*-controller-manager')
  mapfile -t g3 < <(by_suffix 'kafka-[1-9]*'; by_suffix "$KAFKA_NODELETE")
  mapfile -t g4 < <(by_suffix '*-apiserver'; by_suffix 'kafka-0')
  stop_group "${g1[@]}"
  stop_group "${g2[@]}"
  stop_group "${g3[@]}"
  stop_group "${g4[@]}"
  # Whatever else has a pidfile (etcd, names from an older definition).
  for f in "$PID_DIR"/*.pid; do
    [[ -e $f ]] || continue
    n=${f##*/}
    stop_proc "${n%.pid}"
  done
fi

# Leftovers: ours by state path + executable, but without a (valid) pidfile.
mapfile -t left < <(all_pids_of_ours)
if ((${#left[@]})); then
  log "stopping ${#left[@]} leftover process(es) of $STATE: ${left[*]}"
  for p in "${left[@]}"; do kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null || true; done
  for _ in $(seq 1 100); do
    mapfile -t left < <(all_pids_of_ours)
    ((${#left[@]})) || break
    sleep 0.1
  done
  for p in "${left[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  sleep 0.5
fi
mapfile -t left < <(all_pids_of_ours)
((${#left[@]} == 0)) || die "still running after down: ${left[*]}"

if [[ $PURGE == 1 ]]; then
  log "purging state in $STATE (logs kept in $LOG_DIR)"
  find "$STATE" -mindepth 1 -maxdepth 1 ! -name logs ! -name .lock -exec rm -rf {} +
fi
log "down: nothing of $STATE is running"
