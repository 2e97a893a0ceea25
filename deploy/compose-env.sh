#!/usr/bin/env bash
# Writes, once, the secrets of the compose stack (docker-compose.yml) into a
# directory (default .data/compose; AGENTFLOW_COMPOSE_DIR or the first
# argument): `env`, the environment file docker-compose reads
# (--env-file: database, MinIO and Grafana passwords, random, 0600), and
# `checkpoint.keys`, the workers' checkpoint signing keys (0600). Existing
# files are kept: the stack's volumes were initialised with them.
set -euo pipefail
dir=${1:-${AGENTFLOW_COMPOSE_DIR:-.data/compose}}
mkdir -p "$dir"
chmod 0700 "$dir"
secret() { head -c "$1" /dev/urandom | od -An -tx1 | tr -d ' \n'; }
umask 077
if [ ! -f "$dir/env" ]; then
  cat >"$dir/env" <<EOT
POSTGRES_PASSWORD=$(secret 16)
MINIO_ROOT_USER=agentflow
MINIO_ROOT_PASSWORD=$(secret 16)
GRAFANA_ADMIN_PASSWORD=$(secret 12)
AGENTFLOW_COMPOSE_DIR=$(cd "$dir" && pwd)
EOT
  echo "compose-env: wrote $dir/env"
fi
if [ ! -f "$dir/checkpoint.keys" ]; then
  printf 'compose-%s %s\n' "$(secret 4)" "$(head -c 32 /dev/urandom | base64 -w0)" >"$dir/checkpoint.keys"
  echo "compose-env: wrote $dir/checkpoint.keys"
fi
