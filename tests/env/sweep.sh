#!/usr/bin/env bash
# tests/env/sweep.sh — owns: clearing what earlier test runs left in the environment's
# clusters. The environment keeps its etcd across runs, so a test that failed (its namespace
# is kept for a look) or a sandbox that was stopped leaves Kafka pods that the real nodes'
# kubelets keep restarting, forever, without an operator: they eat the machine's two cores
# and make the next run slow and flaky. This deletes, in every cluster, each namespace
# labelled kstretch.io/test=true and, unless the sandbox's central runs, the sandbox's
# namespace; the finalizers of our resources in them are removed first, as nobody is left to
# honour them. Waits until the real nodes have no pod of those namespaces left.
set -euo pipefail
LOG_TAG=sweep
# shellcheck source=lib.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"

SANDBOX_NAMESPACE=${KSTRETCH_SANDBOX_NAMESPACE:-kafka}
GROUPS_WITH_FINALIZERS=(kafka.strimzi.io core.strimzi.io)

# kube CLUSTER ARGS... — kubectl against CLUSTER.
kube() {
  local c=$1
  shift
  "$KUBECTL" --kubeconfig "$STATE/$c/kubeconfig" --request-timeout=20s "$@"
}

# finalized_kinds CLUSTER — our namespaced resource types (plural.group) in CLUSTER.
finalized_kinds() {
  local g
  for g in "${GROUPS_WITH_FINALIZERS[@]}"; do
    kube "$1" api-resources --api-group="$g" --namespaced -o name 2>/dev/null || true
  done
}

# stale_namespaces CLUSTER — the namespaces to sweep in CLUSTER.
stale_namespaces() {
  kube "$1" get namespaces -l kstretch.io/test=true -o name | sed 's|^namespace/||'
  if ! live_pid sandbox-central >/dev/null 2>&1 &&
    kube "$1" get namespace "$SANDBOX_NAMESPACE" >/dev/null 2>&1; then
    echo "$SANDBOX_NAMESPACE"
  fi
}

# sweep_cluster CLUSTER — removes our finalizers in, and deletes, its stale namespaces;
# records them in SWEPT as "CLUSTER NAMESPACE".
SWEPT=()
sweep_cluster() {
  local c=$1 ns kinds namespaces obj_ns obj
  mapfile -t namespaces < <(stale_namespaces "$c")
  ((${#namespaces[@]})) || return 0
  log "$c: deleting ${#namespaces[@]} namespace(s) left by earlier runs"
  kinds=$(finalized_kinds "$c" | paste -sd, -)
  # One listing of every object of ours that still has finalizers, in any namespace.
  if [[ -n $kinds ]]; then
    while read -r obj_ns obj; do
      [[ " ${namespaces[*]} " == *" $obj_ns "* ]] || continue
      kube "$c" patch "$obj" -n "$obj_ns" --type=merge -p '{"metadata":{"finalizers":null}}' >/dev/null 2>&1 || true
    done < <(kube "$c" get "$kinds" -A -o go-template='{{range .items}}{{if .metadata.finalizers}}{{.metadata.namespace}} {{.kind}}/{{.metadata.name}}{{"\n"}}{{end}}{{end}}' 2>/dev/null)
  fi
  for ns in "${namespaces[@]}"; do
    kube "$c" delete namespace "$ns" --wait=false >/dev/null 2>&1 || true
    SWEPT+=("$c $ns")
  done
}

# pods_left — how many pods the swept namespaces still have.
pods_left() {
  local entry c ns n=0
  for entry in "${SWEPT[@]}"; do
    read -r c ns <<<"$entry"
    n=$((n + $(kube "$c" get pods -n "$ns" --no-headers 2>/dev/null | wc -l)))
  done
  echo "$n"
}

for c in "${CLUSTERS[@]}"; do
  sweep_cluster "$c"
  # A drain test that failed between its drain and its uncordon must not leave a real node
  # unschedulable for every run after it.
  kube "$c" uncordon -l kstretch.test/node=real,kstretch.test/spare!=true >/dev/null 2>&1 || true
  # A spare node stays cordoned until a test moves a pod onto it.
  kube "$c" cordon -l kstretch.test/spare=true >/dev/null 2>&1 || true
done
((${#SWEPT[@]})) || exit 0
for _ in $(seq 120); do
  [[ $(pods_left) == 0 ]] && exit 0
  sleep 1
done
log "pods of swept namespaces are still terminating after 120 s; going on"
