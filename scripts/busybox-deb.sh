#!/usr/bin/env bash
# Prints the path of Debian's busybox-static package cached in DIR,
# downloading it with `apt-get download` when absent (`apt-get update` only
# when that fails). Nothing is installed on the machine. The one source of
# busybox for every image we build: the sandbox rootfs (tools/build-images.sh)
# and the compose stack's shell (deploy/build-images.sh).
#
#   scripts/busybox-deb.sh DIR
set -euo pipefail
dir=${1:?usage: $0 CACHE_DIR}
mkdir -p "$dir"
deb=$(ls "$dir"/busybox-static_*.deb 2>/dev/null | sort | tail -n1 || true)
if [[ -z $deb ]]; then
  echo "busybox-deb: downloading busybox-static with apt-get" >&2
  err=$(mktemp)
  trap 'rm -f "$err"' EXIT
  if ! (cd "$dir" && apt-get download busybox-static >&2 2>"$err"); then
    echo "busybox-deb: apt-get download failed; running apt-get update once" >&2
    apt-get update >&2 || { echo "busybox-deb: apt-get update failed: $(cat "$err")" >&2; exit 1; }
    (cd "$dir" && apt-get download busybox-static >&2) || { echo "busybox-deb: cannot download busybox-static" >&2; exit 1; }
  fi
  deb=$(ls "$dir"/busybox-static_*.deb | sort | tail -n1)
fi
printf '%s\n' "$deb"
