#!/usr/bin/env bash
# Build the SWE sandbox's base image from a local root filesystem: no registry is needed.
#   debootstrap (Debian packages only) -> tarball -> `docker import` -> turngym/swe-rootfs:bookworm
# Then docker/swe/Dockerfile adds the sandbox user and the work directories on top of it.
# Usage: docker/swe/build_rootfs.sh [image-tag]      (root; needs debootstrap and a running dockerd)
set -euo pipefail
TAG="${1:-turngym/swe-rootfs:bookworm}"
SUITE="${SUITE:-bookworm}"
MIRROR="${MIRROR:-http://deb.debian.org/debian}"
# python3 runs the tests, git snapshots and diffs the repository, patch applies patches.
PACKAGES="python3,git,patch,procps,ca-certificates"

if docker image inspect "$TAG" >/dev/null 2>&1; then
    echo "$TAG already exists"; exit 0
fi
command -v debootstrap >/dev/null || { echo "debootstrap is missing: apt-get install debootstrap" >&2; exit 1; }
WORK="$(mktemp -d /var/tmp/turngym-rootfs.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$WORK/rootfs" "$MIRROR"
rm -rf "$WORK/rootfs/var/cache/apt/archives/"*.deb "$WORK/rootfs/var/lib/apt/lists/"*
tar -C "$WORK/rootfs" -c . | docker import --change 'CMD ["/bin/bash"]' - "$TAG"
echo "built $TAG"
