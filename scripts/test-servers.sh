#!/usr/bin/env bash
# Builds, once, a server the integration and e2e tests start on loopback,
# and prints the path of its binary:
#
#   scripts/test-servers.sh minio      MinIO (S3-compatible object store)
#   scripts/test-servers.sh registry   the distribution (OCI) registry
#   scripts/test-servers.sh promtool   Prometheus' promtool (checks and unit-tests
#                                      deploy/prometheus/alerts.yml)
#
# Binaries go to ${AGENTFLOW_CACHE:-$HOME/.cache/agentflow}/<name>-<version>/,
# keyed by the pinned version, so a version bump builds anew and a present
# binary is reused. All come from the Go module proxy (no image registry is
# reachable here); CGO is off so they are static. The versions are pinned
# here and in internal/testenv (servers.go): change both.
set -euo pipefail

MINIO_VERSION=v0.0.0-20260212201848-7aac2a2c5b7c    # what @latest resolved to on 2026-12-03
REGISTRY_VERSION=v3.1.2
PROMTOOL_VERSION=v0.316.0  # the module proxy's tag of Prometheus 3.x (v0.316.0 = 3.16)

cache="${AGENTFLOW_CACHE:-$HOME/.cache/agentflow}"

build() { # name module version binary
  local dir="$cache/$1-$3" bin
  bin="$dir/$4"
  if [ ! -x "$bin" ]; then
    mkdir -p "$dir"
    # Build into a temp dir and rename, so an interrupted build never
    # leaves a half-written binary that a later run would trust.
    local tmp
    tmp=$(mktemp -d "$dir/.build-XXXXXX")
    # Expanded now: at EXIT the function's local tmp is out of scope.
    trap "rm -rf '$tmp'" EXIT
    echo "test-servers: building $2@$3 (once) into $dir" >&2
    # The module proxy sometimes times out (TLS handshake) on a cold
    # machine: a few tries, since a failed build fails the whole CI run.
    local try
    for try in 1 2 3; do
      CGO_ENABLED=0 GOBIN="$tmp" GOFLAGS="${GOFLAGS:-} -buildvcs=false" go install "$2@$3" && break
      [ "$try" -lt 3 ] || { echo "test-servers: building $2@$3 failed 3 times" >&2; return 1; }
      echo "test-servers: building $2@$3 failed (try $try), retrying" >&2
      sleep $((try * 10))
    done
    mv "$tmp/$4" "$bin"
    rm -rf "$tmp"
    trap - EXIT
  fi
  echo "$bin"
}

case "${1:-}" in
  minio) build minio github.com/minio/minio "$MINIO_VERSION" minio ;;
  registry) build registry github.com/distribution/distribution/v3/cmd/registry "$REGISTRY_VERSION" registry ;;
  promtool) build promtool github.com/prometheus/prometheus/cmd/promtool "$PROMTOOL_VERSION" promtool ;;
  *) echo "usage: $0 minio|registry|promtool" >&2; exit 2 ;;
esac
