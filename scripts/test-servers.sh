#!/usr/bin/env bash
# Builds, once, a server the integration and e2e tests start on loopback,
# and prints the path of its binary:
#
#   scripts/test-servers.sh minio      MinIO (S3-compatible object store)
#   scripts/test-servers.sh registry   the distribution (OCI) registry
#   scripts/test-servers.sh promtool   Prometheus' promtool (checks and unit-tests
#                                      deploy/prometheus/alerts.yml)
#   scripts/test-servers.sh temporal-server
#                                      the full Temporal server, its SQL schema
#                                      tool and the release's schema, in one
#                                      directory (printed; tests/cluster_e2e)
#   scripts/test-servers.sh prometheus the Prometheus server (the compose stack's
#                                      image, deploy/images)
#   scripts/test-servers.sh temporal-ui
#                                      the Temporal Web UI server (the compose
#                                      stack's image); its front end is in the
#                                      module, built by Temporal
#
# Binaries go to ${AGENTFLOW_CACHE:-$HOME/.cache/agentflow}/<name>-<version>/,
# keyed by the pinned version, so a version bump builds anew and a present
# binary is reused. All come from the Go module proxy (no image registry is
# reachable here); CGO is off so they are static. The versions are pinned
# here and in internal/testenv (servers.go): change both.
set -euo pipefail

MINIO_VERSION=v0.0.0-20260212201848-7aac2a2c5b7c    # what @latest resolved to on 2026-12-03
REGISTRY_VERSION=v3.1.2
TEMPORAL_SERVER_VERSION=v1.29.1
PROMTOOL_VERSION=v0.316.0  # the module proxy's tag of Prometheus 3.x (v0.316.0 = 3.16)
PROMETHEUS_VERSION=$PROMTOOL_VERSION # one Prometheus release for the rules' tests and the stack
TEMPORAL_UI_VERSION=v2.42.1  # what the pinned Temporal CLI (v1.5.1) embeds

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

# temporal-server: the full server and its SQL schema tool, with the
# release's schema files, assembled in one directory (printed).
temporal_server() {
  local dir="$cache/temporal-server-$TEMPORAL_SERVER_VERSION" srv sqltool
  if [ ! -x "$dir/temporal-server" ] || [ ! -x "$dir/temporal-sql-tool" ] || [ ! -d "$dir/schema" ]; then
    srv=$(build temporal-server-bin go.temporal.io/server/cmd/server "$TEMPORAL_SERVER_VERSION" server)
    sqltool=$(build temporal-sql-tool go.temporal.io/server/cmd/tools/sql "$TEMPORAL_SERVER_VERSION" sql)
    local schema
    schema="$(go env GOMODCACHE)/go.temporal.io/server@$TEMPORAL_SERVER_VERSION/schema"
    [ -d "$schema" ] || { echo "test-servers: $schema missing after the build" >&2; return 1; }
    mkdir -p "$dir"
    rm -rf "$dir/schema.tmp" && cp -r "$schema" "$dir/schema.tmp" && chmod -R u+w "$dir/schema.tmp"
    rm -rf "$dir/schema" && mv "$dir/schema.tmp" "$dir/schema"
    ln -sf "$srv" "$dir/temporal-server"
    ln -sf "$sqltool" "$dir/temporal-sql-tool"
  fi
  echo "$dir"
}

case "${1:-}" in
  minio) build minio github.com/minio/minio "$MINIO_VERSION" minio ;;
  registry) build registry github.com/distribution/distribution/v3/cmd/registry "$REGISTRY_VERSION" registry ;;
  promtool) build promtool github.com/prometheus/prometheus/cmd/promtool "$PROMTOOL_VERSION" promtool ;;
  prometheus) build prometheus github.com/prometheus/prometheus/cmd/prometheus "$PROMETHEUS_VERSION" prometheus ;;
  temporal-ui) build temporal-ui github.com/temporalio/ui-server/v2/cmd/server "$TEMPORAL_UI_VERSION" server ;;
  temporal-server) temporal_server ;;
  *) echo "usage: $0 minio|registry|promtool|prometheus|temporal-ui|temporal-server" >&2; exit 2 ;;
esac
