#!/usr/bin/env bash
# tests/env/recovery-check.sh — owns: proving the environment survives a crash. It kills every
# process of a running environment with SIGKILL (as a machine crash or an OOM kill would),
# checks that up.sh recovers it without manual cleanup, then that down.sh leaves nothing of
# ours running, and finally brings it up again so the caller finds it as it was (unless
# KSTRETCH_ENV_LEAVE_DOWN=1, as CI sets it: it stops the environment anyway).
set -euo pipefail
LOG_TAG=recovery
# shellcheck source=lib.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"
here=$ENV_DIR

mapfile -t victims < <(all_pids_of_ours)
((${#victims[@]} > 0)) || die "the environment is not running: start it with tests/env/up.sh"
# The nodelete cluster is a cluster of its own: make sure it is among the crashed too.
nodelete_pid=$(live_pid "$KAFKA_NODELETE" kafka.Kafka) ||
  die "$KAFKA_NODELETE is not running: start the environment with tests/env/up.sh"
[[ " ${victims[*]} " == *" $nodelete_pid "* ]] || die "$KAFKA_NODELETE (pid $nodelete_pid) is not among the processes to kill"
log "crash: SIGKILL to ${#victims[@]} processes"
kill -KILL "${victims[@]}" 2>/dev/null || true
for _ in $(seq 50); do
  [[ -z $(all_pids_of_ours) ]] && break
  sleep 0.1
done

t=$SECONDS
"$here/up.sh" >/dev/null
"$here/status.sh" >/dev/null || { "$here/status.sh" || true; die "up.sh after a crash left the environment unhealthy"; }
if ! new_pid=$(live_pid "$KAFKA_NODELETE" kafka.Kafka) || [[ $new_pid == "$nodelete_pid" ]] || ! kafka_nodelete_check; then
  die "$KAFKA_NODELETE was not restarted healthy after the crash"
fi
log "up.sh recovered from the crash in $((SECONDS - t))s (incl. $KAFKA_NODELETE: pid $nodelete_pid -> $new_pid)"

"$here/down.sh" >/dev/null
left=$(all_pids_of_ours)
[[ -z $left ]] || die "down.sh left processes running: $left"
left=$("$here/nodes.sh" leftovers)
[[ -z $left ]] || die "down.sh left parts of the real nodes behind:
$left"
log "down.sh left nothing running and nothing of the real nodes behind"

# CI stops the environment right after (.ci/run): bringing it up again would be wasted there.
if [[ ${KSTRETCH_ENV_LEAVE_DOWN:-} == 1 ]]; then
  log "environment left down (KSTRETCH_ENV_LEAVE_DOWN=1)"
else
  "$here/up.sh" >/dev/null
  log "environment is up again"
fi
echo "recovery-check: 3 passed, 0 failed"
