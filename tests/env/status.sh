#!/usr/bin/env bash
# tests/env/status.sh — owns: reporting which processes of the kstretch test environment
# are running and healthy (read-only: starts and stops nothing). Exit code 0 when every
# process is up and healthy, 1 otherwise.
set -euo pipefail
LOG_TAG=status # used by log() in lib.sh
# shellcheck source=lib.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"

bad=0
row() { # row NAME CHECK MARKER...
  local name=$1 check=$2 pid state
  shift 2
  if pid=$(live_pid "$name" "$@"); then
    if "$check" >/dev/null 2>&1; then state=healthy; else state=UNHEALTHY bad=1; fi
  else
    pid=- state=DOWN bad=1
  fi
  printf '%-28s %-8s %-10s %s\n' "$name" "$pid" "$state" "$LOG_DIR/$name.log"
}

printf '%-28s %-8s %-10s %s\n' PROCESS PID STATE LOG
row etcd etcd_check "$ETCD_BIN"
for CUR_I in "${!CLUSTERS[@]}"; do
  CUR_C=${CLUSTERS[$CUR_I]}
  row "$CUR_C-apiserver" apiserver_check "$K8S_DIR/kube-apiserver"
  row "$CUR_C-controller-manager" kcm_check "$K8S_DIR/kube-controller-manager"
  row "$CUR_C-scheduler" sched_check "$K8S_DIR/kube-scheduler"
  row "$CUR_C-kwok" kwok_check "$KWOK_DIR/kwok"
  row "$CUR_C-apiproxy" apiproxy_check socat
  row "$CUR_C-containerd" containerd_check containerd
  row "$CUR_C-kubelet" kubelet_check kubelet
  row "$CUR_C-kube-proxy" kube_proxy_check kube-proxy
  row "$CUR_C-local-path" local_path_check local-path-provisioner
done
for KAFKA_N in "${KAFKA_NODES[@]}"; do
  row "kafka-$KAFKA_N" kafka_node_check kafka.Kafka
done
row "$KAFKA_NODELETE" kafka_nodelete_check kafka.Kafka
row connect connect_check ConnectDistributed
row prometheus prometheus_check "$STATE/prometheus/prometheus.yml"
[[ -f $STATE/env ]] && echo "env file: $STATE/env"
exit "$bad"
