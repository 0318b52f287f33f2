#!/usr/bin/env bash
# tests/env/lose.sh CLUSTER — owns: losing one simulated cluster as a whole, for the tests of
# `kstretch forget`: its real node (kubelet, containerd, every pod's process, its network)
# and its control plane (apiserver, controller-manager, scheduler, kwok) stop; the other
# clusters, etcd and the environment's Kafka go on. up.sh brings the cluster back with what
# its etcd prefix and volumes kept (as a machine that was off comes back).
set -euo pipefail
LOG_TAG=lose # used by log() in lib.sh
# shellcheck source=lib.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"

[[ $# == 1 ]] || die "usage: lose.sh CLUSTER"
cluster=$1
if [[ -z ${KSTRETCH_LOCK_HELD:-} ]]; then
  exec 9>"$STATE/.lock"
  flock -w 900 9 || die "another up.sh/down.sh is running on $STATE"
  export KSTRETCH_LOCK_HELD=1
fi
"$ENV_DIR/nodes.sh" lose "$cluster"
for part in kwok scheduler controller-manager apiserver; do
  stop_proc "$cluster-$part"
done
log "cluster $cluster is lost (tests/env/up.sh brings it back)"
