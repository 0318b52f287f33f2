#!/usr/bin/env bash
# scripts/build-images.sh — owns: the engine-free image build. Packs already-built binaries into
# OCI image archives target/images/kstretch-<component>-<version>.oci.tar, tagged
# <registry>/kstretch-<component>:<version>, with what images/Dockerfile's distroless runtime
# would give them: the shared libraries the binary needs (from this host, found with ldd, with
# their Debian copyright and package records), CA certificates, a non-root user 65532, no shell.
# scripts/check-images.sh verifies the result. Push with:
#   skopeo copy oci-archive:target/images/kstretch-central-0.1.0.oci.tar docker://ghcr.io/kstretch/kstretch-central:0.1.0
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  cat <<'EOF'
usage: scripts/build-images.sh [--profile release|debug] [--component central|agent|cli]... [--no-strip]
  --profile    which cargo build to pack: target/<profile>/ (default: release, env KSTRETCH_IMAGE_PROFILE).
               Build first: cargo build --release -p kstretch-central -p kstretch-agent
  --component  repeatable; default: central and agent (the charts' images). cli packs the kstretch CLI.
  --no-strip   keep the binaries' debug info (by default it is stripped, symbols stay for backtraces)
env: KSTRETCH_IMAGE_REGISTRY (default ghcr.io/kstretch), SOURCE_DATE_EPOCH (default: HEAD's commit time)
EOF
}

profile=${KSTRETCH_IMAGE_PROFILE:-release}
registry=${KSTRETCH_IMAGE_REGISTRY:-ghcr.io/kstretch}
components=()
strip=1
while (($#)); do
  case $1 in
    --profile) profile=${2:?--profile needs a value}; shift 2 ;;
    --profile=*) profile=${1#*=}; shift ;;
    --component) components+=("${2:?--component needs a value}"); shift 2 ;;
    --component=*) components+=("${1#*=}"); shift ;;
    --no-strip) strip=0; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "[images] unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done
((${#components[@]})) || components=(central agent)
case $profile in release | debug) ;; *) echo "[images] --profile must be release or debug, not '$profile'" >&2; exit 2 ;; esac
[[ $(uname -m) == x86_64 ]] || { echo "[images] this packs the host's libraries: run it on x86_64 (found $(uname -m))" >&2; exit 1; }

# One version for the crates and both charts' appVersion (the charts' default image tag).
version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' Cargo.toml)
[[ -n $version ]] || { echo "[images] no version in Cargo.toml [workspace.package]" >&2; exit 1; }
for chart in kstretch-central kstretch-agent; do
  app=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' "charts/$chart/Chart.yaml")
  [[ $app == "$version" ]] || {
    echo "[images] charts/$chart/Chart.yaml appVersion '$app' differs from the workspace version '$version' (Cargo.toml): make them equal, the chart's default image tag is its appVersion" >&2
    exit 1
  }
done

epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
[[ -z $(git status --porcelain --untracked-files=no 2>/dev/null) ]] || revision+=-dirty
license=$(sed -n '/^\[workspace.package\]/,/^\[/s/^license *= *"\(.*\)"/\1/p' Cargo.toml)
source_url=$(sed -n '/^\[workspace.package\]/,/^\[/s/^repository *= *"\(.*\)"/\1/p' Cargo.toml)
[[ -f /etc/ssl/certs/ca-certificates.crt ]] || {
  echo "[images] /etc/ssl/certs/ca-certificates.crt is missing: apt-get install ca-certificates" >&2
  exit 1
}

out_dir=target/images
mkdir -p "$out_dir"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Debian records of the package owning a host file: its copyright (LGPL/GPL notices for glibc and
# libgcc travel with the image) and its dpkg status in status.d/, where scanners such as trivy
# and grype look in distroless images to know the glibc version.
declare -A pkg_done
add_package_of() {
  local path=$1 pkg
  command -v dpkg >/dev/null || return 0
  pkg=$({ dpkg -S "$path" || dpkg -S "$(readlink -f "$path")"; } 2>/dev/null | head -n1 || true)
  pkg=${pkg%%:*} && pkg=${pkg%%,*}
  [[ -n $pkg && -z ${pkg_done[$pkg]:-} ]] || return 0
  pkg_done[$pkg]=1
  [[ -f /usr/share/doc/$pkg/copyright ]] && files+=(--file "/usr/share/doc/$pkg/copyright:/usr/share/doc/$pkg/copyright")
  dpkg-query -s "$pkg" >"$work/status-$pkg" && files+=(--file "$work/status-$pkg:/var/lib/dpkg/status.d/$pkg")
}

# The jars for Kafka pods' metrics, as images/Dockerfile pins them (its `ADD --checksum` lines
# into /opt/kstretch/metrics), from Maven Central (cached, checked against their SHA-256): one
# `--file` argument each.
metrics_jar_files() {
  local sha url dest jar count=0
  while read -r sha url dest; do
    jar=${KSTRETCH_CACHE:-$HOME/.cache/kstretch}/jars/${url##*/}
    if ! sha256sum -c --status <<<"$sha  $jar" 2>/dev/null; then
      mkdir -p "$(dirname "$jar")"
      curl -fsSL --retry 3 -o "$jar.part" "$url" || { echo "[images] cannot download $url" >&2; exit 1; }
      sha256sum -c --status <<<"$sha  $jar.part" || { echo "[images] $url does not match its pinned SHA-256" >&2; exit 1; }
      mv "$jar.part" "$jar"
    fi
    echo "--file"
    echo "$jar:$dest"
    count=$((count + 1))
  done < <(sed -nE 's#^ADD --chmod=0644 --checksum=sha256:([0-9a-f]{64}) (https://\S+) (/opt/kstretch/metrics/\S+)$#\1 \2 \3#p' images/Dockerfile)
  ((count > 0)) || { echo "[images] images/Dockerfile pins no metrics jar" >&2; exit 1; }
}

for component in "${components[@]}"; do
  case $component in
    central | agent) bin=kstretch-$component ;;
    cli) bin=kstretch ;;
    *) echo "[images] unknown component '$component' (central, agent or cli)" >&2; exit 2 ;;
  esac
  src=${CARGO_TARGET_DIR:-target}/$profile/$bin
  [[ -x $src ]] || {
    flag=; [[ $profile == release ]] && flag=" --release"
    echo "[images] $src is missing: cargo build$flag -p kstretch-$component --bins" >&2
    exit 1
  }
  # A copy, so a concurrent cargo build cannot change the binary between ldd and packing.
  cp "$src" "$work/$bin"
  if ((strip)); then strip --strip-debug "$work/$bin"; fi

  files=(--file /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt)
  pkg_done=()
  add_package_of /usr/share/ca-certificates
  # ldd lines: "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)", "/lib64/ld-linux-x86-64.so.2 (0x...)".
  # Each library goes to the path the loader asked for, as a regular file (symlinks resolved).
  ldd_out=$(ldd "$work/$bin" 2>&1) || {
    echo "[images] ldd $src failed: $ldd_out" >&2
    exit 1
  }
  if grep -q "not found" <<<"$ldd_out"; then
    echo "[images] $src needs libraries this host lacks:" >&2
    grep "not found" <<<"$ldd_out" >&2
    exit 1
  fi
  libs=()
  while read -r lib; do
    [[ -n $lib ]] || continue
    libs+=("$lib")
    files+=(--file "$(readlink -f "$lib"):$lib")
    add_package_of "$lib"
  done < <(sed -nE 's#^\s*(\S+ => )?(/\S+) \(0x[0-9a-f]+\)$#\2#p' <<<"$ldd_out" | sort -u)
  if ! grep -q "statically linked\|not a dynamic executable" <<<"$ldd_out" && ((${#libs[@]} == 0)); then
    echo "[images] could not read the libraries of $src from ldd:" >&2
    echo "$ldd_out" >&2
    exit 1
  fi

  if [[ $component == agent ]]; then
    metrics_jar_files >"$work/metrics-files"
    mapfile -t metrics_files <"$work/metrics-files"
    files+=("${metrics_files[@]}")
  fi

  name=$registry/kstretch-$component:$version
  out=$out_dir/kstretch-$component-$version.oci.tar
  desc=$(sed -n '/^description *= *"/{s/^description *= *"\(.*\)"/\1/p;q}' "${component}/Cargo.toml")
  result=$(python3 images/oci_image.py --out "$out" --name "$name" --epoch "$epoch" \
    --binary "$work/$bin" --binary-path "/usr/local/bin/$bin" "${files[@]}" \
    --label "org.opencontainers.image.title=kstretch-$component" \
    --label "org.opencontainers.image.description=${desc:-kstretch $component}" \
    --label "org.opencontainers.image.version=$version" \
    --label "org.opencontainers.image.revision=$revision" \
    --label "org.opencontainers.image.created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)" \
    --label "org.opencontainers.image.licenses=$license" \
    --label "org.opencontainers.image.source=$source_url" \
    --label "dev.kstretch.build-profile=$profile")
  manifest=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["manifest"])' "$result")
  echo "[images] $name -> $out ($(du -h "$out" | cut -f1); $profile binary$( ((strip)) && echo ", debug info stripped"); ${#libs[@]} libraries from the host: ${libs[*]}; manifest $manifest)"
done
