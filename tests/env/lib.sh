# shellcheck shell=bash disable=SC2034
# tests/env/lib.sh — owns: the helpers shared by up.sh, down.sh and status.sh: paths of
# the state dir, process bookkeeping (pidfiles, identity checks, start/stop by process
# group), port checks and bounded waits. Sourced, never run.

ENV_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.sh
. "$ENV_DIR/versions.sh"

STATE=$KSTRETCH_STATE_DIR
LOG_DIR=$STATE/logs
PID_DIR=$STATE/pids
BIN_DIR=$STATE/bin
CACHE=$KSTRETCH_CACHE
K8S_DIR=$CACHE/k8s-$KSTRETCH_K8S_VERSION
ETCD_BIN=$CACHE/etcd-$KSTRETCH_ETCD_VERSION/etcd
KWOK_DIR=$CACHE/kwok-$KSTRETCH_KWOK_VERSION
HELM_BIN=$CACHE/helm-$KSTRETCH_HELM_VERSION/helm
KAFKA_LIBS=$CACHE/kafka-$KSTRETCH_KAFKA_VERSION/libs
KUBECTL=$K8S_DIR/kubectl
read -r -a CLUSTERS <<<"$KSTRETCH_CLUSTERS"
KAFKA_NODES=(0 1 2 3)          # 0 = controller-only, 1..3 = broker-only
KAFKA_BROKERS=(1 2 3)
# The nodelete cluster: one node (id 0 of its own cluster), process name kafka-nodelete.
KAFKA_NODELETE=kafka-nodelete
KAFKA_NODELETE_DIR=$STATE/kafka-nodelete

log() { printf '[%s %s] %s\n' "${LOG_TAG:-env}" "$(date +%H:%M:%S)" "$*" >&2; }
die() {
  log "ERROR: $*"
  exit 1
}

# Absolute state path: the marker that identifies our processes (every one of them has
# it in its command line), and nothing else's.
state_marker() { printf '%s/' "$STATE"; }

pidfile() { printf '%s/%s.pid' "$PID_DIR" "$1"; }
# startfile NAME — when NAME's recorded process started: after a crash its pid may have been
# given to another process of ours (seen: a new Kafka node took a killed node's pid, and
# "stopping" the dead one killed the new one).
startfile() { printf '%s/%s.start' "$PID_DIR" "$1"; }

# proc_start PID — when PID started, in clock ticks since boot (/proc/PID/stat field 22).
proc_start() {
  local stat
  { stat=$(<"/proc/$1/stat"); } 2>/dev/null || return 1
  # The command name in parentheses may hold spaces: count fields after it.
  stat=${stat##*) }
  # shellcheck disable=SC2086
  set -- $stat
  printf '%s\n' "${20}"
}

# started_as_recorded NAME PID — PID is the process NAME's pidfile was written for, not a later
# one with the same number (true when no start was recorded).
started_as_recorded() {
  local f
  f=$(startfile "$1")
  [[ -f $f ]] || return 0
  [[ $(proc_start "$2" 2>/dev/null) == "$(<"$f")" ]]
}

# cmdline PID — the process's command line with spaces, or nothing (gone / zombie).
cmdline() { tr '\0' ' ' 2>/dev/null <"/proc/$1/cmdline" || true; }

# is_ours PID [MARKER...] — PID is alive, a process (not one of another process's threads:
# a stale pidfile's number can be a JVM thread's, whose /proc entry shows the JVM's command
# line, and signalling it would stop the JVM), not a zombie, carries our state path in its
# command line and every MARKER too.
is_ours() {
  local pid=$1 cl m
  shift
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  [[ $(awk '$1 == "Tgid:" {print $2}' "/proc/$pid/status" 2>/dev/null) == "$pid" ]] || return 1
  cl=$(cmdline "$pid")
  [[ -n $cl && $cl == *"$(state_marker)"* ]] || return 1
  for m in "$@"; do [[ $cl == *"$m"* ]] || return 1; done
}

# live_pid NAME [MARKER...] — print the pid of NAME if its pidfile points to a live
# process of ours (with every MARKER in its command line).
live_pid() {
  local name=$1 f pid
  f=$(pidfile "$name")
  shift
  [[ -f $f ]] || return 1
  pid=$(<"$f")
  is_ours "$pid" "$@" || return 1
  started_as_recorded "$name" "$pid" || return 1
  printf '%s\n' "$pid"
}

# group_alive PGID — some process of the group is still there (zombies excluded).
group_alive() {
  local p
  for p in $(pgrep -g "$1" 2>/dev/null); do
    [[ -n $(cmdline "$p") ]] && return 0
  done
  return 1
}

# stop_proc NAME — SIGTERM the process group of NAME's pidfile, wait up to
# KSTRETCH_STOP_TIMEOUT (10 s), then SIGKILL. Only touches a process that is ours.
stop_proc() {
  local name=$1 f pid i
  f=$(pidfile "$name")
  [[ -f $f ]] || return 0
  pid=$(<"$f")
  if is_ours "$pid" && started_as_recorded "$name" "$pid"; then
    log "stopping $name (pid $pid)"
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < ${KSTRETCH_STOP_TIMEOUT:-10} * 10; i++)); do
      group_alive "$pid" || is_ours "$pid" || break
      sleep 0.1
    done
    if group_alive "$pid" || is_ours "$pid"; then
      log "$name did not stop in ${KSTRETCH_STOP_TIMEOUT:-10}s: SIGKILL"
      kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
      for ((i = 0; i < 50; i++)); do
        group_alive "$pid" || is_ours "$pid" || break
        sleep 0.1
      done
    fi
  fi
  rm -f "$f" "$(startfile "$name")"
}

# port_owner PORT — the `ss` line of whoever listens on PORT, if anyone.
port_owner() { ss -ltnpH "sport = :$1" 2>/dev/null | head -n 3; }

# require_free_ports NAME PORT... — fail clearly if a port is taken. Our own processes
# were stopped before this is called, so a listener here is not ours: never kill it.
require_free_ports() {
  local name=$1 port owner i p
  shift
  for port in "$@"; do
    owner=
    # A process of ours that was just stopped may take a moment to release the port.
    for ((i = 0; i < 30; i++)); do
      owner=$(port_owner "$port")
      [[ -z $owner ]] && break
      # A process of this environment that lost its pidfile (e.g. up.sh was killed
      # between starting it and writing the pidfile): ours, so stop it.
      while read -r p; do
        if is_ours_exe "$p"; then
          log "port $port is held by a process of this environment without pidfile (pid $p): stopping it"
          local sig=TERM
          ((i < 15)) || sig=KILL
          kill -"$sig" -- "-$p" 2>/dev/null || kill -"$sig" "$p" 2>/dev/null || true
        fi
      done < <(grep -o 'pid=[0-9]*' <<<"$owner" | cut -d= -f2 | sort -u)
      sleep 0.2
    done
    [[ -z $owner ]] || die "cannot start $name: port $port is already taken by a process that is not part of this environment (state dir $STATE):
$owner
Stop that process or run with another KSTRETCH_STATE_DIR/ports."
  done
}

# start_proc NAME CMD... — start CMD in its own session/process group (setsid), stdin
# from /dev/null, stdout+stderr to $LOG_DIR/NAME.log (previous log kept as .log.prev),
# and record its pid. Inherited fds above 2 (like our lock) are closed.
start_proc() {
  local name=$1 logf pid
  shift
  logf=$LOG_DIR/$name.log
  [[ -f $logf ]] && mv -f "$logf" "$logf.prev"
  printf '=== %s starting %s: %s\n' "$(date -u +%FT%TZ)" "$name" "$*" >"$logf"
  setsid "$@" >>"$logf" 2>&1 </dev/null 9>&- &
  pid=$!
  printf '%s\n' "$pid" >"$(pidfile "$name")"
  proc_start "$pid" >"$(startfile "$name")" 2>/dev/null || rm -f "$(startfile "$name")"
  # Until the forked child has exec'd, its command line is still ours (bash): wait for
  # the exec so that identity checks (is_ours) see the real command.
  local i cl
  for ((i = 0; i < 100; i++)); do
    cl=$(cmdline "$pid")
    [[ -z $cl || $cl == *"$(state_marker)"* ]] && break # exec'd, or already gone
    sleep 0.05
  done
  log "started $name (pid $pid, log $logf)"
}

# wait_for TIMEOUT DESC CMD... — poll CMD every 0.5 s until it succeeds or TIMEOUT s
# pass. On timeout print what CMD last said.
wait_for() {
  local timeout=$1 desc=$2 deadline out
  shift 2
  deadline=$((SECONDS + timeout))
  while ((SECONDS < deadline)); do
    if out=$("$@" 2>&1); then return 0; fi
    sleep 0.5
  done
  log "timed out after ${timeout}s waiting for $desc; last output:"
  printf '%s\n' "$out" | tail -n 20 >&2
  return 1
}

# wait_proc_healthy NAME TIMEOUT CHECK... — wait until CHECK passes while NAME's process
# stays alive. Returns 0 healthy, 1 timeout, 2 process died.
wait_proc_healthy() {
  local name=$1 timeout=$2 deadline pid
  shift 2
  pid=$(<"$(pidfile "$name")") || return 2
  deadline=$((SECONDS + timeout))
  while ((SECONDS < deadline)); do
    "$@" >/dev/null 2>&1 && return 0
    { is_ours "$pid" && started_as_recorded "$name" "$pid"; } || return 2
    sleep 0.5
  done
  return 1
}

tail_log() {
  local f=$LOG_DIR/$1.log
  [[ -f $f ]] || return 0
  log "last lines of $f:"
  tail -n "${2:-30}" "$f" >&2
}

# tcp_open PORT — something accepts connections on 127.0.0.1:PORT.
tcp_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# is_ours_exe PID — ours by state path AND runs one of our binaries (from any cache
# dir) or java; so a shell whose command line mentions the state dir never qualifies.
is_ours_exe() {
  local exe
  exe=$(readlink "/proc/$1/exe" 2>/dev/null || true)
  case ${exe##*/} in
    etcd | kube-apiserver | kube-controller-manager | kube-scheduler | kwok | java | \
      containerd | containerd-shim-runc-v2 | kubelet | kube-proxy | socat | local-path-provisioner | \
      prometheus) is_ours "$1" ;;
    *) return 1 ;;
  esac
}

# all_pids_of_ours — every live process whose command line has our state path and whose
# executable is one of our binaries or java (so our own shells are never included).
all_pids_of_ours() {
  local p self_chain=" $$ " q
  q=$$
  while [[ $q -gt 1 ]]; do
    q=$(awk '/^PPid:/ {print $2}' "/proc/$q/status" 2>/dev/null || echo 1)
    self_chain+="$q "
  done
  for p in $(pgrep -f -- "$(state_marker)" 2>/dev/null); do
    [[ $self_chain == *" $p "* ]] && continue
    is_ours_exe "$p" && printf '%s\n' "$p"
  done
  # Not the status of the last check: `left=$(all_pids_of_ours)` must not stop a `set -e` caller.
  return 0
}

upper() { printf '%s' "$1" | tr '[:lower:]-' '[:upper:]_'; }

# ---------------------------------------------------------------- health checks
# Checks of one component each; the cluster ones use CUR_C (name) and CUR_I (index),
# the main Kafka cluster's KAFKA_N (node id).
CUR_C="" CUR_I="" KAFKA_N=""
ETCD_URL=http://127.0.0.1:$KSTRETCH_ETCD_CLIENT_PORT
etcd_check() { curl -sf -m 2 "$ETCD_URL/health" | grep -q '"health":"true"'; }
cluster_port() { # cluster_port BASE INDEX
  printf '%s' $(($1 + $2))
}
apiserver_url() { printf 'https://127.0.0.1:%s' "$(cluster_port "$KSTRETCH_APISERVER_BASE_PORT" "$1")"; }
apiserver_check() {
  local dir=$STATE/$CUR_C
  [[ $(curl -sf -m 3 --cacert "$dir/pki/ca.crt" -H "Authorization: Bearer $(<"$dir/pki/admin.token")" \
    "$(apiserver_url "$CUR_I")/readyz") == ok ]]
}
kcm_check() { curl -sfk -m 3 "https://127.0.0.1:$(cluster_port "$KSTRETCH_KCM_BASE_PORT" "$CUR_I")/healthz" | grep -qx ok; }
sched_check() { curl -sfk -m 3 "https://127.0.0.1:$(cluster_port "$KSTRETCH_SCHED_BASE_PORT" "$CUR_I")/healthz" | grep -qx ok; }
kwok_check() { curl -sf -m 3 "http://127.0.0.1:$(cluster_port "$KSTRETCH_KWOK_BASE_PORT" "$CUR_I")/healthz" >/dev/null; }
# A Kafka node is up when its log (fresh per start) says it finished starting (a broker
# only gets there once registered and unfenced) and its port accepts connections.
kafka_node_check() {
  grep -q "\[KafkaRaftServer nodeId=$KAFKA_N\] Kafka Server started" "$LOG_DIR/kafka-$KAFKA_N.log" 2>/dev/null &&
    tcp_open $((KSTRETCH_KAFKA_BASE_PORT + KAFKA_N))
}
# The same check for the nodelete cluster's single combined node (node id 0 there).
kafka_nodelete_check() {
  grep -q "\[KafkaRaftServer nodeId=0\] Kafka Server started" "$LOG_DIR/$KAFKA_NODELETE.log" 2>/dev/null &&
    tcp_open "$KSTRETCH_KAFKA_NODELETE_PORT"
}
CONNECT_URL=http://127.0.0.1:$KSTRETCH_CONNECT_PORT
# /health (KIP-1017) turns 200 once the worker has joined its group and read its config
# topic, i.e. it can take connectors; the plugin list proves connect-file is loaded.
connect_check() {
  curl -sf -m 3 -o /dev/null "$CONNECT_URL/health" &&
    curl -sf -m 3 "$CONNECT_URL/connector-plugins" | grep -q FileStreamSourceConnector
}

# The real nodes of cluster C (index I): node J=0 of every cluster, and J=1, the spare node, of
# the clusters in KSTRETCH_SPARE_NODES; see nodes.sh for the layout. Node J's helpers take J
# last, 0 when left out; the current node is CUR_C/CUR_I/CUR_J.
CUR_J=0
node_name() { printf '%s-real-%s' "$1" "${2:-0}"; }
node_suffix() { ((${1:-0} == 0)) || printf -- '-%s' "$1"; }
netns() { printf 'kstretch-%s%s' "$1" "$(node_suffix "${2:-0}")"; }
host_ip() { printf '10.%s.%s.1' $((250 + ${2:-0})) "$1"; }
node_ip() { printf '10.%s.%s.2' $((250 + ${2:-0})) "$1"; }
pod_cidr() { printf '10.%s.%s.0/24' $((110 + $1)) "${2:-0}"; }
node_dir() { printf '%s/nodes/%s%s' "$STATE" "$1" "$(node_suffix "${2:-0}")"; }
cgroup_root() { printf 'kstretch-%s%s' "$1" "$(node_suffix "${2:-0}")"; }
# node_indexes C — the indexes J of cluster C's real nodes.
node_indexes() {
  echo 0
  [[ " $KSTRETCH_SPARE_NODES " != *" $1 "* ]] || echo 1
}
in_node() { nsenter --net="/run/netns/$(netns "$CUR_C" "$CUR_J")" "$@"; }
apiserver_port() { cluster_port "$KSTRETCH_APISERVER_BASE_PORT" "$1"; }
apiproxy_check() { (exec 3<>"/dev/tcp/$(host_ip "$CUR_I")/$(apiserver_port "$CUR_I")") 2>/dev/null; }
containerd_check() { ctr --address "$(node_dir "$CUR_C" "$CUR_J")/containerd.sock" version >/dev/null 2>&1; }
kubelet_check() { in_node curl -sf -m 2 http://127.0.0.1:10248/healthz | grep -qx ok; }
prometheus_check() { curl -sf "http://127.0.0.1:$KSTRETCH_PROMETHEUS_PORT/-/ready" >/dev/null; }
local_path_check() { "$KUBECTL" --kubeconfig "$STATE/$CUR_C/kubeconfig" get storageclass local-path -o name >/dev/null 2>&1; }
kube_proxy_check() { in_node curl -s -m 2 -o /dev/null http://127.0.0.1:10256/healthz; }
