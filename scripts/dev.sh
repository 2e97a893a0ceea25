#!/usr/bin/env bash
# Start/stop the local stack in the background: the Temporal dev server and
# one agentflow worker. Idempotent; PID files and logs live under .data/.
#   scripts/dev.sh up|down|status|wait
set -euo pipefail
cd "$(dirname "$0")/.."

DATA=${AGENTFLOW_DATA:-.data}
ADDR_IP=${TEMPORAL_IP:-127.0.0.1}
PORT=${TEMPORAL_PORT:-7233}
UI_PORT=${TEMPORAL_UI_PORT:-8233}
TEMPORAL=${TEMPORAL_BIN:-./bin/temporal}
AGENTCTL=${AGENTCTL_BIN:-./bin/agentctl}
export TEMPORAL_ADDRESS="$ADDR_IP:$PORT"

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

up() {
  if alive "$DATA/temporal.pid"; then
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
    # seed specs read vault://prod/slack/webhook, nothing else.
    # AGENTFLOW_RUNTIME=runsc runs every sandbox under gVisor
    # (scripts/install-runsc.sh registers it).
    setsid "$AGENTCTL" worker --address "$TEMPORAL_ADDRESS" \
      ${AGENTFLOW_GIT_ROOT:+--git-root "$AGENTFLOW_GIT_ROOT"} \
      --checkpoint-dir "$DATA/checkpoints" --log-dir "$DATA/logs" \
      --vault-dir "$DATA/vault" --gpu-policy "${AGENTFLOW_GPU_POLICY:-ignore}" \
      --secret-vault-prefix prod/slack \
      ${AGENTFLOW_RUNTIME:+--runtime "$AGENTFLOW_RUNTIME"} \
      --health-addr 127.0.0.1:8080 --metrics-addr 127.0.0.1:9090 \
      >"$DATA/worker.log" 2>&1 </dev/null &
    echo $! >"$DATA/worker.pid"
  fi
  if ! wait_http http://127.0.0.1:8080/healthz 60; then
    echo "worker: not healthy; see $DATA/worker.log" >&2
    tail -20 "$DATA/worker.log" >&2 || true
    exit 1
  fi
  echo "up: Temporal $TEMPORAL_ADDRESS, Web UI http://localhost:$UI_PORT, worker healthy (metrics http://127.0.0.1:9090/metrics)"
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
}

status() {
  for n in temporal worker; do
    if alive "$DATA/$n.pid"; then echo "$n: running (pid $(cat "$DATA/$n.pid"))"; else echo "$n: stopped"; fi
  done
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) status ;;
  *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
