#!/usr/bin/env bash
# Builds the images docker-compose.yml runs, locally (nothing is pulled:
# no image registry is reachable here). Each image is a `docker import` of a
# rootfs assembled from static Go binaries and, for PostgreSQL, Debian's
# own package files:
#
#   deploy/build-images.sh [all|agentctl|postgres|temporal-server|temporal-ui|minio|prometheus]...
#
#   agentflow/agentctl:dev          bin/agentctl, bin/agentctl-engine, bin/temporal (make build temporal;
#                                   AGENTFLOW_BIN_DIR: another directory of them)
#   agentflow/postgres:15           Debian's postgresql-15 files as installed on this machine, busybox sh
#   agentflow/temporal-server:<v>   the full server + SQL schema tool + schema (scripts/test-servers.sh),
#                                   deploy/temporal/config.yaml filled in for the stack; schema auto-setup
#   agentflow/temporal-ui:<v>       the Temporal Web UI server (its front end ships in the Go module)
#   agentflow/minio:dev             MinIO
#   agentflow/prometheus:<v>        Prometheus (the server; its web UI's assets are not in the module)
#
# Where a real deployment would use the upstream image instead, docs/DEPLOY.md
# ("The compose stack") names it. Grafana cannot be built here (its front end
# needs a Node toolchain): the stack runs the upstream image under a profile.
set -euo pipefail
cd "$(dirname "$0")/.."

TEMPORAL_SERVER_VERSION=v1.29.1 # scripts/test-servers.sh pins the same
TEMPORAL_UI_VERSION=v2.42.1
PROMETHEUS_VERSION=v0.316.0

servers() { scripts/test-servers.sh "$1" | tail -1; }

# busybox: the one shell the entry scripts need (and initdb, which runs
# postgres through popen). Debian's busybox-static, one static binary, from
# the package the sandbox images use (scripts/busybox-deb.sh), unpacked once.
busybox_bin() {
  local dir="$scratch/busybox"
  if [ ! -x "$dir/bin/busybox" ]; then
    mkdir -p "$dir"
    dpkg -x "$(scripts/busybox-deb.sh "${AGENTFLOW_DATA_DIR:-.data}/cache")" "$dir"
  fi
  echo "$dir/bin/busybox"
}

new_root() { # dir: an empty rootfs with /tmp, /etc/passwd and busybox sh
  local root=$1
  mkdir -p "$root/bin" "$root/tmp" "$root/etc"
  chmod 1777 "$root/tmp"
  printf 'root:x:0:0:root:/:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$root/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
  cp "$(busybox_bin)" "$root/bin/busybox"
  ln -s busybox "$root/bin/sh"
}

static_only() { # binaries...: refuse a dynamically linked one (the rootfs has no libc)
  local b
  for b in "$@"; do
    [ -x "$b" ] || { echo "build-images: $b missing" >&2; return 1; }
    if file -L "$b" 2>/dev/null | grep -q "dynamically linked"; then
      echo "build-images: $b is dynamically linked; build it with CGO_ENABLED=0" >&2
      return 1
    fi
  done
}

# with_libs copies binaries (by absolute path) and every shared library
# they load, at the same paths, into root: Debian's files, unchanged.
with_libs() { # root files...
  local root=$1 f lib
  shift
  for f in "$@"; do
    mkdir -p "$root$(dirname "$f")"
    cp -a "$f" "$root$f"
    while read -r lib; do
      [ -n "$lib" ] && [ ! -e "$root$lib" ] || continue
      mkdir -p "$root$(dirname "$lib")"
      cp -L "$lib" "$root$lib"
    done < <(ldd "$f" 2>/dev/null | grep -oE '/[^ ]+' || true)
  done
}

import() { # root tag changes...: the image, reproducibly (sorted, mtime 0)
  local root=$1 tag=$2 args=() c
  shift 2
  for c in "$@"; do args+=(--change "$c"); done
  tar --sort=name --mtime=@0 --numeric-owner -C "$root" -cf - . |
    docker import "${args[@]}" --change "LABEL org.agentflow.image=$tag" - "$tag" >/dev/null
  echo "build-images: $tag $(docker image inspect -f '{{.Id}}' "$tag")"
}

agentctl() {
  local root=$1 b=${AGENTFLOW_BIN_DIR:-bin}
  static_only "$b/agentctl" "$b/agentctl-engine" "$b/temporal" || {
    echo "build-images: run make build temporal first" >&2
    return 1
  }
  mkdir -p "$root/bin" "$root/tmp" "$root/data" "$root/etc"
  chmod 1777 "$root/tmp"
  cp -L "$b/agentctl" "$b/agentctl-engine" "$b/temporal" "$root/bin/"
  printf 'root:x:0:0:root:/:/bin/agentctl\n' >"$root/etc/passwd"
  printf 'root:x:0:\n' >"$root/etc/group"
  chown -R 0:0 "$root"
  import "$root" agentflow/agentctl:dev 'ENTRYPOINT ["/bin/agentctl"]' 'CMD ["--help"]' 'WORKDIR /data'
}

postgres() {
  local root=$1 bins pg
  bins=(/usr/lib/postgresql/*/bin/postgres)
  [ -x "${bins[-1]}" ] || { echo "build-images: PostgreSQL is not installed (apt-get install postgresql)" >&2; return 1; }
  pg=$(dirname "$(dirname "${bins[-1]}")") # /usr/lib/postgresql/15
  local v=${pg##*/}
  new_root "$root"
  with_libs "$root" "$pg/bin/postgres" "$pg/bin/initdb" "$pg/bin/pg_ctl" "$pg/bin/pg_isready"
  local so
  for so in "$pg"/lib/*.so; do with_libs "$root" "$so"; done
  mkdir -p "$root/usr/share/postgresql"
  cp -a "/usr/share/postgresql/$v" "$root/usr/share/postgresql/"
  [ -d /usr/share/zoneinfo ] && mkdir -p "$root/usr/share" && cp -a /usr/share/zoneinfo "$root/usr/share/"
  printf 'postgres:x:999:999:PostgreSQL:/var/lib/postgresql:/bin/sh\n' >>"$root/etc/passwd"
  printf 'postgres:x:999:\n' >>"$root/etc/group"
  mkdir -p "$root/var/lib/postgresql/data" "$root/var/run/postgresql"
  cp deploy/images/postgres-entrypoint.sh "$root/bin/entrypoint"
  chmod 0755 "$root/bin/entrypoint"
  chown -R 0:0 "$root"
  # The data directory's owner is copied into a new named volume.
  chown -R 999:999 "$root/var/lib/postgresql" "$root/var/run/postgresql"
  chmod 0700 "$root/var/lib/postgresql/data"
  import "$root" "agentflow/postgres:$v" 'ENTRYPOINT ["/bin/entrypoint"]' 'USER postgres' \
    "ENV PATH=/bin:$pg/bin PGDATA=/var/lib/postgresql/data" 'EXPOSE 5432'
}

temporal_server() {
  local root=$1 dir
  dir=$(servers temporal-server)
  static_only "$dir/temporal-server" "$dir/temporal-sql-tool"
  new_root "$root"
  cp -L "$dir/temporal-server" "$dir/temporal-sql-tool" "$root/bin/"
  mkdir -p "$root/etc/temporal/config" "$root/etc/temporal/schema"
  cp -r "$dir/schema/postgresql" "$root/etc/temporal/schema/"
  cp deploy/temporal/dynamicconfig.yaml "$root/etc/temporal/config/dynamicconfig.yaml"
  # deploy/temporal/config.yaml, the one server configuration, filled in
  # for the stack: fixed ports inside the container, the frontend on every
  # interface, the database password from the environment at start (the
  # server renders a file whose first lines ask for it as a Go template).
  {
    echo '# enable-template: the password comes from $POSTGRES_PASSWORD at start.'
    sed -e 's|\${PG_ADDR}|{{ env "POSTGRES_SEEDS" \| default "postgres" }}:{{ env "POSTGRES_PORT" \| default "5432" }}|g' \
      -e 's|\${PG_PASSWORD}|{{ env "POSTGRES_PASSWORD" }}|g' -e 's|\${TLS}||g' \
      -e 's|\${FRONTEND_BIND_IP}|0.0.0.0|g' \
      -e 's|\${FRONTEND_PORT}|7233|g' -e 's|\${FRONTEND_MEMBERSHIP_PORT}|6933|g' -e 's|\${FRONTEND_HTTP_PORT}|7243|g' \
      -e 's|\${HISTORY_PORT}|7234|g' -e 's|\${HISTORY_MEMBERSHIP_PORT}|6934|g' \
      -e 's|\${MATCHING_PORT}|7235|g' -e 's|\${MATCHING_MEMBERSHIP_PORT}|6935|g' \
      -e 's|\${WORKER_PORT}|7239|g' -e 's|\${WORKER_MEMBERSHIP_PORT}|6939|g' \
      -e 's|\${DYNAMIC_CONFIG_FILE}|/etc/temporal/config/dynamicconfig.yaml|g' \
      deploy/temporal/config.yaml
  } >"$root/etc/temporal/config/development.yaml"
  if grep -q '\${' "$root/etc/temporal/config/development.yaml"; then
    echo "build-images: a placeholder of deploy/temporal/config.yaml is not filled in" >&2
    return 1
  fi
  cp deploy/images/temporal-entrypoint.sh "$root/bin/entrypoint"
  chmod 0755 "$root/bin/entrypoint"
  chown -R 0:0 "$root"
  chown -R 65534:65534 "$root/etc/temporal/config"
  import "$root" "agentflow/temporal-server:$TEMPORAL_SERVER_VERSION" 'ENTRYPOINT ["/bin/entrypoint"]' \
    'USER nobody' 'WORKDIR /etc/temporal' 'EXPOSE 7233'
}

temporal_ui() {
  local root=$1 bin cfg
  bin=$(servers temporal-ui)
  static_only "$bin"
  cfg="$(go env GOMODCACHE)/github.com/temporalio/ui-server/v2@$TEMPORAL_UI_VERSION/config/docker.yaml"
  [ -f "$cfg" ] || { echo "build-images: $cfg missing" >&2; return 1; }
  new_root "$root"
  cp -L "$bin" "$root/bin/temporal-ui-server"
  mkdir -p "$root/etc/temporal-ui/config"
  # Upstream's own configuration for its container: every setting from an
  # environment variable (TEMPORAL_ADDRESS, TEMPORAL_UI_PORT, TEMPORAL_CODEC_ENDPOINT…).
  cp "$cfg" "$root/etc/temporal-ui/config/docker.yaml"
  chmod 0644 "$root/etc/temporal-ui/config/docker.yaml"
  chown -R 0:0 "$root"
  import "$root" "agentflow/temporal-ui:$TEMPORAL_UI_VERSION" \
    'ENTRYPOINT ["/bin/temporal-ui-server", "--root", "/etc/temporal-ui", "--config", "config", "--env", "docker", "start"]' \
    'USER nobody' 'EXPOSE 8080'
}

minio() {
  local root=$1 bin
  bin=$(servers minio)
  static_only "$bin"
  new_root "$root"
  cp -L "$bin" "$root/bin/minio"
  cp deploy/images/minio-entrypoint.sh "$root/bin/entrypoint"
  chmod 0755 "$root/bin/entrypoint"
  mkdir -p "$root/data"
  chown -R 0:0 "$root"
  chown 65534:65534 "$root/data"
  import "$root" agentflow/minio:dev 'ENTRYPOINT ["/bin/entrypoint"]' 'USER nobody' 'EXPOSE 9000'
}

prometheus() {
  local root=$1 bin
  bin=$(servers prometheus)
  static_only "$bin"
  new_root "$root"
  cp -L "$bin" "$root/bin/prometheus"
  mkdir -p "$root/prometheus" "$root/etc/prometheus"
  chown -R 0:0 "$root"
  chown 65534:65534 "$root/prometheus"
  import "$root" "agentflow/prometheus:$PROMETHEUS_VERSION" 'USER nobody' 'WORKDIR /prometheus' \
    'ENTRYPOINT ["/bin/prometheus"]' \
    'CMD ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus"]' 'EXPOSE 9090'
}

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

all=(agentctl postgres temporal_server temporal_ui minio prometheus)
want=("$@")
[ ${#want[@]} -gt 0 ] || want=(all)
[ "${want[0]}" = all ] && want=("${all[@]}")
for w in "${want[@]}"; do
  w=${w//-/_}
  case " ${all[*]} " in *" $w "*) ;; *) echo "usage: $0 [all|agentctl|postgres|temporal-server|temporal-ui|minio|prometheus]..." >&2; exit 2 ;; esac
  root=$(mktemp -d "$scratch/root.XXXXXX")
  "$w" "$root"
  rm -rf "$root"
done
