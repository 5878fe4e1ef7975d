#!/usr/bin/env bash
# Builds docker/Dockerfile into localhost/pdbsym:latest on a Debian 12 host with
# no Docker engine and no registry: daemonless podman (as root) against a
# debian:bookworm-slim base made locally with debootstrap from the host's apt
# mirror.  Idempotent; the first run takes a few minutes, later ones seconds.
#   docker/build.sh [TAG]
# env: CONTAINER_STATE  storage, config and cached base (default $TMPDIR/pdbsym-container-state)
# Afterwards:  . "$CONTAINER_STATE/env.sh"; podman run --rm --network=host TAG
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
TAG=${1:-localhost/pdbsym:latest}
STATE=${CONTAINER_STATE:-${TMPDIR:-/tmp}/pdbsym-container-state}
BASE_REF=docker.io/library/debian:bookworm-slim
log() { printf '[docker/build %(%T)T] %s\n' -1 "$*" >&2; }

need=()
for p in podman buildah runc debootstrap; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || need+=("$p")
done
if ((${#need[@]})); then
  log "apt-get install ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need[@]}" >/dev/null
fi

# private podman configuration; runc because crun refuses hybrid cgroups here
mkdir -p "$STATE"
if [[ ! -f $STATE/env.sh ]]; then
  hn=$(ulimit -Hn); hu=$(ulimit -Hu)
  [[ $hu == unlimited || $hu -gt 32768 ]] && hu=32768
  [[ $hn == unlimited || $hn -gt 1048576 ]] && hn=1048576
  cat > "$STATE/containers.conf" <<CONF
[containers]
default_ulimits = ["nofile=$hn:$hn", "nproc=$hu:$hu"]
[engine]
runtime = "runc"
tmp_dir = "$STATE/run/libpod-tmp"
CONF
  cat > "$STATE/storage.conf" <<CONF
[storage]
driver = "overlay"
graphroot = "$STATE/storage"
runroot = "$STATE/run"
CONF
  cat > "$STATE/env.sh" <<CONF
export CONTAINERS_CONF=$STATE/containers.conf
export CONTAINERS_STORAGE_CONF=$STATE/storage.conf
CONF
fi
# shellcheck disable=SC1091
. "$STATE/env.sh"

# one build at a time per state folder (two worktrees may share it)
exec 9>"$STATE/lock"
flock 9

# the base recipe's version: a base made by an older recipe is re-imported
BASE_VERSION=2
if podman image exists "$BASE_REF" && [[ $(cat "$STATE/base.version" 2>/dev/null) != "$BASE_VERSION" ]]; then
  log "base image from an older recipe: re-importing"
  podman rmi -f "$BASE_REF" localhost/debian:bookworm-slim >/dev/null 2>&1 || true
fi
if [[ -s $STATE/base.tar && $(cat "$STATE/base.version" 2>/dev/null) != "$BASE_VERSION" ]]; then
  # version 1 kept debootstrap's .deb files (100+ MB) in every image
  tar --delete -f "$STATE/base.tar" --wildcards './var/cache/apt/archives/*.deb' 2>/dev/null || true
fi
if ! podman image exists "$BASE_REF"; then
  if [[ ! -s $STATE/base.tar ]]; then
    mirror=""
    [[ -f /etc/apt/sources.list.d/debian.sources ]] &&
      mirror=$(awk '$1=="URIs:"{print $2; exit}' /etc/apt/sources.list.d/debian.sources)
    [[ -z $mirror && -f /etc/apt/sources.list ]] &&
      mirror=$(awk '$1=="deb" && $0 !~ /security/ {for(i=2;i<=NF;i++) if ($i ~ /^[a-z]+:\/\//) {print $i; exit}}' /etc/apt/sources.list)
    [[ -n $mirror ]] || { echo "no Debian mirror in /etc/apt/sources.list*" >&2; exit 1; }
    rootfs=$STATE/rootfs
    rm -rf "$rootfs"
    log "debootstrap --variant=minbase bookworm (a few minutes)"
    debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$STATE/debootstrap.log" 2>&1 ||
      { tail -20 "$STATE/debootstrap.log" >&2; exit 1; }
    if [[ -f /etc/apt/sources.list.d/debian.sources ]]; then
      rm -f "$rootfs/etc/apt/sources.list"
      cp /etc/apt/sources.list.d/debian.sources "$rootfs/etc/apt/sources.list.d/"
    else
      grep -E '^deb ' /etc/apt/sources.list >"$rootfs/etc/apt/sources.list"
    fi
    printf 'Acquire::Check-Valid-Until "false";\n' >"$rootfs/etc/apt/apt.conf.d/99no-check-valid-until"
    # apt in the image keeps no downloaded .deb (as Debian's official images)
    printf 'DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/*.bin || true"; };\nAPT::Keep-Downloaded-Packages "false";\nBinary::apt::APT::Keep-Downloaded-Packages "false";\n' \
      >"$rootfs/etc/apt/apt.conf.d/docker-clean"
    rm -rf "$rootfs"/usr/share/man/* "$rootfs"/usr/share/locale/* "$rootfs"/var/lib/apt/lists/* \
           "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/log/* "$rootfs"/tmp/*
    : >"$rootfs/etc/resolv.conf"
    tar --numeric-owner -C "$rootfs" -cf "$STATE/base.tar.tmp" . && mv "$STATE/base.tar.tmp" "$STATE/base.tar"
    rm -rf "$rootfs"
  fi
  log "podman import -> $BASE_REF"
  podman import --change 'CMD ["bash"]' "$STATE/base.tar" "$BASE_REF" >/dev/null
  podman tag "$BASE_REF" localhost/debian:bookworm-slim
  echo "$BASE_VERSION" >"$STATE/base.version"
fi

# docker format keeps the HEALTHCHECK (the OCI format has none)
log "podman build -> $TAG"
podman build --pull=never --network=host --format docker -f "$root/docker/Dockerfile" -t "$TAG" "$root" >"$STATE/build.log" 2>&1 ||
  { tail -40 "$STATE/build.log" >&2; exit 1; }
# the build stage keeps a tag (all its layers are cached now: a second or
# two), so that pruning the untagged images of earlier builds (about 20 MB
# each source change) keeps this build's as the cache for the next one
podman build --pull=never --network=host --format docker --target build -f "$root/docker/Dockerfile" \
  -t localhost/pdbsym-build:cache "$root" >>"$STATE/build.log" 2>&1 &&
  podman image prune -f >/dev/null 2>&1 || true
log "done: $TAG ($(podman image inspect "$TAG" --format '{{.Size}}') bytes)"
