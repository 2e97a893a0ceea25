#!/usr/bin/env bash
# Start/stop the local stack in the background: the Temporal dev server and
# one agentflow worker. Idempotent; PID files and logs live under .data/.
#   scripts/dev.sh up|down|status|minio   (minio: start only MinIO)
# STORE=minio also starts MinIO (S3) on 127.0.0.1:9000 with its data under
# .data/minio, and the worker keeps checkpoints, logs and results there
# (--store s3://agentflow) instead of in local directories.
# TEMPORAL_DB=postgres runs the full Temporal server (scripts/test-servers.sh
# temporal-server) on PostgreSQL (Debian's package; data under
# .data/postgres) instead of the SQLite dev server, with the configuration
# the tests use (deploy/temporal/), and runs `agentctl setup
# --create-namespace` on it. It has no Web UI.
set -euo pipefail
cd "$(dirname "$0")/.."

DATA=${AGENTFLOW_DATA:-.data}
ADDR_IP=${TEMPORAL_IP:-127.0.0.1}
PORT=${TEMPORAL_PORT:-7233}
UI_PORT=${TEMPORAL_UI_PORT:-8233}
TEMPORAL=${TEMPORAL_BIN:-./bin/temporal}
AGENTCTL=${AGENTCTL_BIN:-./bin/agentctl}
STORE=${STORE:-}
TEMPORAL_DB=${TEMPORAL_DB:-dev}
PG_PORT=${PG_PORT:-5433}
HEALTH_ADDR=${AGENTFLOW_HEALTH_ADDR:-127.0.0.1:8080}
METRICS_ADDR=${AGENTFLOW_METRICS_ADDR:-127.0.0.1:9090}
MINIO_ADDR=${MINIO_ADDR:-127.0.0.1:9000}
MINIO_CONSOLE=${MINIO_CONSOLE_ADDR:-127.0.0.1:9001}
BUCKET=${AGENTFLOW_BUCKET:-agentflow}
export TEMPORAL_ADDRESS="$ADDR_IP:$PORT"

case "$STORE" in
  "" | local | minio) ;;
  *) echo "STORE=$STORE: want minio (or unset for local directories)" >&2; exit 2 ;;
esac
case "$TEMPORAL_DB" in
  dev | postgres) ;;
  *) echo "TEMPORAL=$TEMPORAL_DB: want postgres (or unset for the dev server)" >&2; exit 2 ;;
esac

mkdir -p "$DATA"

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

wait_port() { # host port seconds
  local i
  for ((i = 0; i < $3 * 10; i++)); do
    if (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  return 1
}

wait_http() { # url seconds
  local i
  for ((i = 0; i < $2 * 10; i++)); do
    if curl -fsS "$1" >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  return 1
}

# secret N: N random bytes, hex.
secret() { od -An -N"$1" -tx1 /dev/urandom | tr -d ' \n'; }

# minio_up starts MinIO once (root credentials generated on first start and
# kept in $DATA/minio.env, 0600), creates the bucket, and writes
# $DATA/store.env: what a worker or `agentctl logs` needs to use the bucket
# (source it in a shell). A shared store needs one checkpoint signing key
# for every worker: $DATA/checkpoint.keys, generated once.
minio_up() {
  local bin
  bin=${AGENTFLOW_MINIO:-}
  if [ -z "$bin" ]; then
    if [ ! -x scripts/test-servers.sh ]; then
      echo "minio: scripts/test-servers.sh is missing; set AGENTFLOW_MINIO to a minio binary" >&2
      exit 1
    fi
    bin=$(scripts/test-servers.sh minio | tail -1)
  fi
  if [ ! -f "$DATA/minio.env" ]; then
    (umask 077 && printf 'MINIO_ROOT_USER=agentflow-%s\nMINIO_ROOT_PASSWORD=%s\n' "$(secret 4)" "$(secret 20)" >"$DATA/minio.env")
  fi
  # shellcheck disable=SC1091
  . "$DATA/minio.env"
  if alive "$DATA/minio.pid"; then
    echo "minio: already running (pid $(cat "$DATA/minio.pid"))"
  else
    echo "minio: starting on $MINIO_ADDR (console $MINIO_CONSOLE), data $DATA/minio, log $DATA/minio.log"
    mkdir -p "$DATA/minio"
    MINIO_ROOT_USER=$MINIO_ROOT_USER MINIO_ROOT_PASSWORD=$MINIO_ROOT_PASSWORD MINIO_BROWSER=off \
      setsid "$bin" server "$DATA/minio" --address "$MINIO_ADDR" --console-address "$MINIO_CONSOLE" \
      >"$DATA/minio.log" 2>&1 </dev/null &
    echo $! >"$DATA/minio.pid"
  fi
  if ! wait_http "http://$MINIO_ADDR/minio/health/ready" 60; then
    echo "minio: not ready; see $DATA/minio.log" >&2
    tail -20 "$DATA/minio.log" >&2 || true
    exit 1
  fi
  # Create the bucket (S3 PUT Bucket, SigV4-signed by curl); 409 = it
  # exists. A just-started MinIO answers 503 until it has initialised.
  local code i
  for ((i = 0; i < 60; i++)); do
    code=$(curl -sS -o "$DATA/minio-bucket.out" -w '%{http_code}' -X PUT \
      --aws-sigv4 "aws:amz:us-east-1:s3" --user "$MINIO_ROOT_USER:$MINIO_ROOT_PASSWORD" \
      "http://$MINIO_ADDR/$BUCKET") || code=000
    [ "$code" = 503 ] || [ "$code" = 000 ] || break
    sleep 0.5
  done
  case "$code" in
    200 | 409) ;;
    *) echo "minio: create bucket $BUCKET: HTTP $code" >&2; cat "$DATA/minio-bucket.out" >&2; exit 1 ;;
  esac
  if [ ! -f "$DATA/checkpoint.keys" ]; then
    (umask 077 && printf 'dev-%s %s\n' "$(secret 4)" "$(head -c 32 /dev/urandom | base64 -w0)" >"$DATA/checkpoint.keys")
  fi
  (umask 077 && cat >"$DATA/store.env" <<EOF_ENV
export AGENTFLOW_STORE=s3://$BUCKET
export AWS_ENDPOINT_URL=http://$MINIO_ADDR
export AWS_ACCESS_KEY_ID=$MINIO_ROOT_USER
export AWS_SECRET_ACCESS_KEY=$MINIO_ROOT_PASSWORD
export AWS_REGION=us-east-1
EOF_ENV
  )
  rm -f "$DATA/minio-bucket.out"
  echo "minio: bucket $BUCKET ready; for agentctl logs: . $DATA/store.env"
}

# pg_as runs a binary of Debian's PostgreSQL (initdb, pg_ctl); under root as
# the postgres user, which must be able to reach $DATA.
pg_as() { # binary args...
  local bins
  bins=(/usr/lib/postgresql/*/bin/postgres)
  [ -x "${bins[-1]}" ] || { echo "postgres: not installed (apt-get install postgresql)" >&2; exit 1; }
  local bin
  bin="$(dirname "${bins[-1]}")/$1"
  shift
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$bin" "$@"; else "$bin" "$@"; fi
}

# temporal_server_up starts PostgreSQL and the full Temporal server on it
# (schema applied once), then registers the namespace and agentflow's
# search attributes.
temporal_server_up() {
  local dir pg srvdir
  dir=$(cd "$DATA" && pwd)
  pg="$dir/postgres"
  mkdir -p "$pg"
  [ "$(id -u)" = 0 ] && chown postgres: "$pg"
  if [ ! -f "$pg/data/PG_VERSION" ]; then
    pg_as initdb -D "$pg/data" --auth=trust --username=postgres -E UTF8 >/dev/null
  fi
  if pg_as pg_ctl -D "$pg/data" status >/dev/null 2>&1; then
    echo "postgres: already running"
  else
    echo "postgres: starting on 127.0.0.1:$PG_PORT, data $pg/data, log $pg/postgres.log"
    pg_as pg_ctl -D "$pg/data" -l "$pg/postgres.log" -w \
      -o "-p $PG_PORT -k $pg -c listen_addresses=127.0.0.1" start >/dev/null
  fi
  srvdir=${AGENTFLOW_TEMPORAL_SERVER:-$(scripts/test-servers.sh temporal-server | tail -1)}
  local marker="$pg/.schema-$(basename "$srvdir")"
  if [ ! -f "$marker" ]; then
    local db versioned
    for db in temporal:temporal temporal_visibility:visibility; do
      versioned="$srvdir/schema/postgresql/v12/${db#*:}/versioned"
      local base=(--plugin postgres12 --ep 127.0.0.1 -p "$PG_PORT" -u postgres --db "${db%%:*}")
      "$srvdir/temporal-sql-tool" "${base[@]}" create-database >>"$pg/schema.log" 2>&1 || true
      if ! { "$srvdir/temporal-sql-tool" "${base[@]}" setup-schema -v 0.0 &&
        "$srvdir/temporal-sql-tool" "${base[@]}" update-schema -d "$versioned"; } >>"$pg/schema.log" 2>&1; then
        echo "temporal: schema of ${db%%:*} failed; see $pg/schema.log" >&2
        exit 1
      fi
    done
    touch "$marker"
  fi
  if alive "$DATA/temporal.pid"; then
    echo "temporal: already running (pid $(cat "$DATA/temporal.pid"))"
  else
    local root="$dir/temporal-server"
    mkdir -p "$root/config"
    cp deploy/temporal/dynamicconfig.yaml "$root/config/dynamicconfig.yaml"
    sed -e "s|\${PG_ADDR}|127.0.0.1:$PG_PORT|g" -e "s|\${TLS}||g" -e "s|\${PG_PASSWORD}||g" -e "s|\${FRONTEND_BIND_IP}|127.0.0.1|g" \
      -e "s|\${FRONTEND_PORT}|$PORT|g" -e "s|\${FRONTEND_MEMBERSHIP_PORT}|6933|g" -e "s|\${FRONTEND_HTTP_PORT}|7243|g" \
      -e "s|\${HISTORY_PORT}|7234|g" -e "s|\${HISTORY_MEMBERSHIP_PORT}|6934|g" \
      -e "s|\${MATCHING_PORT}|7235|g" -e "s|\${MATCHING_MEMBERSHIP_PORT}|6935|g" \
      -e "s|\${WORKER_PORT}|7239|g" -e "s|\${WORKER_MEMBERSHIP_PORT}|6939|g" \
      -e "s|\${DYNAMIC_CONFIG_FILE}|$root/config/dynamicconfig.yaml|g" \
      deploy/temporal/config.yaml >"$root/config/development.yaml"
    if grep -q '\${' "$root/config/development.yaml"; then
      echo "temporal: a placeholder of deploy/temporal/config.yaml is not filled in" >&2; exit 1
    fi
    echo "temporal: starting the full server on 127.0.0.1:$PORT (PostgreSQL), log $DATA/temporal.log"
    setsid "$srvdir/temporal-server" --root "$root" --config config --env development --allow-no-auth start \
      >"$DATA/temporal.log" 2>&1 </dev/null &
    echo $! >"$DATA/temporal.pid"
  fi
  if ! wait_port 127.0.0.1 "$PORT" 120; then
    echo "temporal: did not come up; see $DATA/temporal.log" >&2
    tail -20 "$DATA/temporal.log" >&2 || true
    exit 1
  fi
  local i
  for ((i = 0; i < 30; i++)); do
    "$AGENTCTL" --disable-config-file --address "$TEMPORAL_ADDRESS" setup --create-namespace && return 0
    sleep 2
  done
  echo "temporal: agentctl setup failed; see $DATA/temporal.log" >&2
  exit 1
}

up() {
  local store_args=()
  if [ "$STORE" = minio ]; then
    minio_up
    # shellcheck disable=SC1091
    . "$DATA/store.env"
    store_args=(--store "s3://$BUCKET" --checkpoint-key-file "$DATA/checkpoint.keys")
  fi
  if [ "$TEMPORAL_DB" = postgres ]; then
    temporal_server_up
  elif alive "$DATA/temporal.pid"; then
    echo "temporal: already running (pid $(cat "$DATA/temporal.pid"))"
  else
    echo "temporal: starting dev server on $ADDR_IP:$PORT (Web UI :$UI_PORT), log $DATA/temporal.log"
    setsid "$TEMPORAL" server start-dev \
      --ip "$ADDR_IP" --port "$PORT" --ui-port "$UI_PORT" \
      --db-filename "$DATA/temporal.db" \
      --search-attribute AgentName=Keyword \
      --search-attribute AgentSpec=Keyword \
      --search-attribute AgentStatus=Keyword \
      --dynamic-config-value system.enableActivityEagerExecution=true \
      --dynamic-config-value matching.useNewMatcher=true \
      --log-level warn >"$DATA/temporal.log" 2>&1 </dev/null &
    echo $! >"$DATA/temporal.pid"
  fi
  if ! wait_port "$ADDR_IP" "$PORT" 60; then
    echo "temporal: did not come up; see $DATA/temporal.log" >&2
    tail -20 "$DATA/temporal.log" >&2 || true
    exit 1
  fi
  if alive "$DATA/worker.pid"; then
    echo "worker: already running (pid $(cat "$DATA/worker.pid"))"
  else
    echo "worker: starting, log $DATA/worker.log"
    # A laptop has no GPU: GPU steps (the daily-news seed asks for one) run
    # without it here. Production workers keep the default, require.
    # Git workspaces come only from AGENTFLOW_GIT_ROOT (worker --git-root);
    # unset, the dev worker refuses git imports.
    # Secrets: a worker resolves only the sources its operator allows; the
    # seed specs read vault://prod/slack/webhook, nothing else, here from
    # the development vault directory (a real Vault is worker --vault-addr,
    # docs/DEPLOY.md; VAULT_ADDR is cleared so an operator's shell does not
    # make this worker two vaults).
    # AGENTFLOW_RUNTIME=runsc runs every sandbox under gVisor
    # (scripts/install-runsc.sh registers it). No profile of the
    # operator's Temporal config file: this worker serves the local server.
    VAULT_ADDR= setsid "$AGENTCTL" --disable-config-file worker --address "$TEMPORAL_ADDRESS" \
      ${AGENTFLOW_GIT_ROOT:+--git-root "$AGENTFLOW_GIT_ROOT"} \
      --checkpoint-dir "$DATA/checkpoints" --log-dir "$DATA/logs" \
      ${store_args[@]+"${store_args[@]}"} \
      --dev-vault-dir "$DATA/vault" --gpu-policy "${AGENTFLOW_GPU_POLICY:-ignore}" \
      --secret-vault-prefix prod/slack \
      ${AGENTFLOW_RUNTIME:+--runtime "$AGENTFLOW_RUNTIME"} \
      --health-addr "$HEALTH_ADDR" --metrics-addr "$METRICS_ADDR" \
      >"$DATA/worker.log" 2>&1 </dev/null &
    echo $! >"$DATA/worker.pid"
    echo "${STORE:-local}" >"$DATA/worker.store"
  fi
  # A worker keeps the store it started with.
  if [ "$(cat "$DATA/worker.store" 2>/dev/null || echo local)" != "${STORE:-local}" ]; then
    echo "worker: running with store $(cat "$DATA/worker.store" 2>/dev/null || echo local), not ${STORE:-local}: make down first" >&2
  fi
  if ! wait_http "http://$HEALTH_ADDR/healthz" 60; then
    echo "worker: not healthy; see $DATA/worker.log" >&2
    tail -20 "$DATA/worker.log" >&2 || true
    exit 1
  fi
  if [ "$TEMPORAL_DB" = postgres ]; then
    echo "up: Temporal $TEMPORAL_ADDRESS (full server on PostgreSQL 127.0.0.1:$PG_PORT, no Web UI), worker healthy (metrics http://$METRICS_ADDR/metrics)"
  else
    echo "up: Temporal $TEMPORAL_ADDRESS, Web UI http://localhost:$UI_PORT, worker healthy (metrics http://$METRICS_ADDR/metrics)"
  fi
  if [ "$STORE" = minio ]; then
    echo "up: checkpoints, logs and results in s3://$BUCKET on MinIO http://$MINIO_ADDR (agentctl logs: . $DATA/store.env first)"
  fi
}

stop() { # name
  local pidf="$DATA/$1.pid" i
  if alive "$pidf"; then
    local pid
    pid=$(cat "$pidf")
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 150; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    echo "$1: stopped"
  else
    echo "$1: not running"
  fi
  rm -f "$pidf"
}

down() {
  stop worker
  stop temporal
  if [ -f "$DATA/minio.pid" ]; then stop minio; fi
  if [ -f "$DATA/postgres/data/PG_VERSION" ] && pg_as pg_ctl -D "$(cd "$DATA" && pwd)/postgres/data" status >/dev/null 2>&1; then
    pg_as pg_ctl -D "$(cd "$DATA" && pwd)/postgres/data" -m fast stop >/dev/null && echo "postgres: stopped"
  fi
  rm -f "$DATA/worker.store"
}

status() {
  for n in temporal worker minio; do
    if alive "$DATA/$n.pid"; then echo "$n: running (pid $(cat "$DATA/$n.pid"))"; else echo "$n: stopped"; fi
  done
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) status ;;
  minio) minio_up ;;
  *) echo "usage: $0 up|down|status|minio" >&2; exit 2 ;;
esac
