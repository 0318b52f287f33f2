#!/usr/bin/env bash
# scripts/check-images.sh — owns: proving the image archives of scripts/build-images.sh are real,
# runnable images, not just files. Per image: skopeo (the tool that pushes them) reads the config
# and copies the archive, verifying every digest; umoci, independently, unpacks the rootfs and
# derives the runtime user and command from the config; then the binary runs from that rootfs
# in a chroot, read-only, as uid/gid 65532 with only the image's environment, and must print its
# usage and version, resolve its home from the image's /etc/passwd, load the image's CA
# certificates and fail fast with its own error (never a loader or missing-library error).
set -euo pipefail
cd "$(dirname "$0")/.."

components=()
dir=target/images
while (($#)); do
  case $1 in
    --component) components+=("${2:?--component needs a value}"); shift 2 ;;
    --component=*) components+=("${1#*=}"); shift ;;
    --dir) dir=${2:?--dir needs a value}; shift 2 ;;
    -h | --help) echo "usage: scripts/check-images.sh [--component central|agent|cli]... [--dir target/images]"; exit 0 ;;
    *) echo "[check-images] unknown argument: $1" >&2; exit 2 ;;
  esac
done
((${#components[@]})) || components=(central agent)

fail() { echo "[check-images] FAILED: $*" >&2; exit 1; }
ok() { echo "[check-images] ok: $*"; }

# Independent OCI tools, from Debian like scripts/prereqs.sh's packages.
need_apt=()
for tool in skopeo umoci; do command -v "$tool" >/dev/null || need_apt+=("$tool"); done
if ((${#need_apt[@]})); then
  echo "[check-images] installing missing Debian packages: ${need_apt[*]}" >&2
  if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}"
fi
CHROOT=$(command -v chroot) || fail "chroot (coreutils) is missing"
[[ $(id -u) -eq 0 ]] || fail "run as root: the binaries are started in a chroot as uid 65532"

version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' Cargo.toml)
[[ -n $version ]] || fail "no version in Cargo.toml [workspace.package]"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Read-only root like the charts' readOnlyRootFilesystem: a private mount namespace with a
# read-only bind mount of the rootfs, when the kernel lets us make one; else a plain chroot.
if unshare --mount --propagation private true 2>/dev/null; then
  readonly_root=1
else
  readonly_root=0
  echo "[check-images] note: no mount namespace here, the binaries run on a writable rootfs" >&2
fi

# run_image ROOTFS ENV_FILE ARGS...: the entrypoint's command in the image, as 65532:65532,
# with only the image's Env; sets $rc and $output (stdout and stderr).
run_image() {
  local rootfs=$1 env_file=$2
  shift 2
  local -a env_args
  mapfile -t env_args <"$env_file"
  set +e
  if ((readonly_root)); then
    # shellcheck disable=SC2016 # $1 and $@ belong to the inner sh
    output=$(timeout 30 unshare --mount --propagation private -- sh -c \
      'r=$1; shift; mount --bind "$r" "$r" && mount -o remount,bind,ro "$r" && exec "$@"' \
      sh "$rootfs" env -i "${env_args[@]}" "$CHROOT" --userspec=65532:65532 "$rootfs" "$@" 2>&1)
  else
    output=$(timeout 30 env -i "${env_args[@]}" "$CHROOT" --userspec=65532:65532 "$rootfs" "$@" 2>&1)
  fi
  rc=$?
  set -e
  ((rc != 124)) || fail "$* did not finish within 30 s"
  if grep -qE "error while loading shared libraries|failed to run command|GLIBC_[0-9.]+' not found" <<<"$output"; then
    fail "$* could not start in the image (rc $rc): $output"
  fi
}

expect_output() { # what, pattern
  grep -qF -- "$2" <<<"$output" || fail "$1: expected '$2' in the output (rc $rc):
$output"
}

checked=0
for component in "${components[@]}"; do
  case $component in
    central | agent) bin=kstretch-$component ;;
    cli) bin=kstretch ;;
    *) fail "unknown component '$component' (central, agent or cli)" ;;
  esac
  archive=$dir/kstretch-$component-$version.oci.tar
  [[ -f $archive ]] || fail "$archive is missing: run scripts/build-images.sh first"
  entry=/usr/local/bin/$bin
  echo "[check-images] $archive"

  # (a) skopeo reads the tag (the index's ref.name) and the config.
  ref="oci-archive:$archive:$version"
  config=$(skopeo inspect --config "$ref") || fail "skopeo cannot read $ref"
  python3 - "$config" "$entry" "$version" "kstretch-$component" "$work/env-$component" <<'EOF' || fail "$archive: wrong image config (above)"
import json, sys
config, entry, version, title, env_file = sys.argv[1:]
c = json.loads(config)
cc = c.get("config", {})
want = {
    "architecture": (c.get("architecture"), "amd64"),
    "os": (c.get("os"), "linux"),
    "User": (cc.get("User"), "65532:65532"),
    "Entrypoint": (cc.get("Entrypoint"), [entry]),
    "label version": (cc.get("Labels", {}).get("org.opencontainers.image.version"), version),
    "label title": (cc.get("Labels", {}).get("org.opencontainers.image.title"), title),
}
bad = [f"{k}: {got!r}, expected {exp!r}" for k, (got, exp) in want.items() if got != exp]
if bad:
    print("\n".join(bad), file=sys.stderr)
    sys.exit(1)
with open(env_file, "w") as f:
    f.write("".join(e + "\n" for e in cc.get("Env", [])))
EOF
  ok "skopeo: config linux/amd64, User 65532:65532, Entrypoint [$entry], version label $version"

  # skopeo copy checks every blob against its digest: the same read a push does.
  skopeo copy -q "$ref" "oci:$work/layout-$component:$version" >/dev/null || fail "skopeo copy of $ref failed"
  ok "skopeo copy: every blob matches its digest (what 'skopeo copy ... docker://' pushes)"

  # (b) umoci unpacks the layers and writes the runtime spec it would run.
  bundle=$work/bundle-$component
  umoci unpack --image "$work/layout-$component:$version" "$bundle" >/dev/null 2>"$work/umoci.log" ||
    fail "umoci unpack failed: $(cat "$work/umoci.log")"
  python3 - "$bundle/config.json" "$entry" <<'EOF' || fail "umoci's runtime spec differs (above)"
import json, sys
p = json.load(open(sys.argv[1]))["process"]
u = p["user"]
if (u.get("uid"), u.get("gid"), p["args"]) != (65532, 65532, [sys.argv[2]]):
    print(f"user {u}, args {p['args']}", file=sys.stderr)
    sys.exit(1)
EOF
  rootfs=$bundle/rootfs
  ok "umoci unpack: runtime spec runs [$entry] as uid 65532 gid 65532"

  [[ $(stat -c '%u:%g %a' "$rootfs$entry") == "0:0 755" ]] || fail "$entry is not root-owned 0755: $(stat -c '%u:%g %a' "$rootfs$entry")"
  grep -qx 'nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin' "$rootfs/etc/passwd" || fail "/etc/passwd has no nonroot user 65532"
  grep -q '^nonroot:x:65532:' "$rootfs/etc/group" || fail "/etc/group has no nonroot group 65532"
  [[ $(stat -c '%u:%g' "$rootfs/home/nonroot") == "65532:65532" ]] || fail "/home/nonroot is not owned by 65532"
  certs=$(grep -c 'BEGIN CERTIFICATE' "$rootfs/etc/ssl/certs/ca-certificates.crt" 2>/dev/null || true)
  ((certs >= 50)) || fail "/etc/ssl/certs/ca-certificates.crt has ${certs:-no} certificates"
  shells=$(find "$rootfs" \( -name sh -o -name bash -o -name dash -o -name busybox \) -printf '/%P ')
  [[ -z $shells ]] || fail "the image has a shell: $shells"
  ok "rootfs: $entry root-owned 0755, nonroot 65532 in passwd/group, its home owned by it, $certs CA certificates, no shell ($(du -sh "$rootfs" | cut -f1) unpacked)"

  # (c) run it. A kubeconfig for an API server nobody serves, without a CA of its own, so the
  # client must load the image's CA bundle before it connects (written into this throwaway copy).
  printf '%s\n' 'apiVersion: v1' 'kind: Config' 'clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]' \
    'users: [{name: u, user: {token: image-check}}]' 'contexts: [{name: c, context: {cluster: c, user: u}}]' \
    'current-context: c' >"$rootfs/tmp/kubeconfig"
  chmod 644 "$rootfs/tmp/kubeconfig"
  how="chroot as 65532:65532$( ((readonly_root)) && echo ", read-only root")"

  run_image "$rootfs" "$work/env-$component" "$entry" --help
  ((rc == 0)) || fail "$bin --help exited $rc: $output"
  expect_output "$bin --help" "Usage: $bin"
  ok "$bin --help in the image ($how): exit 0, prints 'Usage: $bin'"

  run_image "$rootfs" "$work/env-$component" "$entry" --version
  [[ $rc -eq 0 && $output == "$bin $version" ]] || fail "$bin --version: rc $rc, '$output', expected '$bin $version'"
  ok "$bin --version in the image: '$output'"

  if [[ $component == cli ]]; then
    run_image "$rootfs" "$work/env-$component" "$entry" --central http://127.0.0.1:1 --timeout 2 status
    ((rc != 0)) || fail "$bin status against a closed port succeeded"
    expect_output "$bin status" "cannot connect to central at http://127.0.0.1:1"
    ok "$bin status with no central: exit $rc, 'cannot connect to central'"
  else
    extra=()
    [[ $component == agent ]] && extra=(--cluster-alias image-check)
    run_image "$rootfs" "$work/env-$component" "$entry" "${extra[@]}" --http-addr 127.0.0.1:0
    ((rc != 0)) || fail "$bin without any Kubernetes configuration exited 0"
    expect_output "$bin without a kubeconfig" "/home/nonroot/.kube/config"
    ok "$bin without a kubeconfig or HOME: exit $rc naming /home/nonroot/.kube/config (uid 65532 found in the image's /etc/passwd)"

    run_image "$rootfs" "$work/env-$component" "$entry" "${extra[@]}" --kubeconfig /nonexistent/kubeconfig
    ((rc != 0)) || fail "$bin with a missing kubeconfig exited 0"
    expect_output "$bin --kubeconfig /nonexistent/kubeconfig" "cannot read kubeconfig /nonexistent/kubeconfig"
    ok "$bin --kubeconfig /nonexistent/kubeconfig: exit $rc, 'cannot read kubeconfig'"

    run_image "$rootfs" "$work/env-$component" "$entry" "${extra[@]}" --kubeconfig /tmp/kubeconfig --http-addr 127.0.0.1:0
    ((rc != 0)) || fail "$bin against a closed API server port exited 0"
    expect_output "$bin against https://127.0.0.1:1" "cannot reach the Kubernetes API server"
    expect_output "$bin against https://127.0.0.1:1" "Connection refused"
    ok "$bin against https://127.0.0.1:1: exit $rc, 'cannot reach the Kubernetes API server' (kubeconfig read, TLS client built on the image's CA bundle, TCP connect refused)"
  fi
  rm -rf "$bundle" "$work/layout-$component"
  checked=$((checked + 1))
done
echo "[check-images] all $checked image(s) verified"
