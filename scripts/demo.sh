#!/usr/bin/env bash
# The `make run` demo: register the locally built tools (idempotent) and run
# specs/demo.yaml end to end against the stack `make up` started.
set -euo pipefail
cd "$(dirname "$0")/.."
AGENTCTL=${AGENTCTL_BIN:-./bin/agentctl}
IMAGES=${AGENTFLOW_IMAGES:-.data/images.json}
UI_PORT=${TEMPORAL_UI_PORT:-8233}
STOP=${DEMO_STOP:-make down} # what stops the stack this demo ran on
# The local stack: a profile of the operator's Temporal config file (a
# cluster's namespace, TLS, API key) must not leak into it.
ctl() { "$AGENTCTL" --disable-config-file "$@"; }

[ -f "$IMAGES" ] || { echo "demo: $IMAGES missing; run make images" >&2; exit 1; }

# images.json holds one object per line: {"name":..,"version":..,"tag":..,"id":..}
registered=$(ctl tool list -o json 2>/dev/null || echo "[]")
while IFS= read -r line; do
  name=$(sed -n 's/.*"name":"\([^"]*\)".*/\1/p' <<<"$line")
  version=$(sed -n 's/.*"version":"\([^"]*\)".*/\1/p' <<<"$line")
  id=$(sed -n 's/.*"id":"\([^"]*\)".*/\1/p' <<<"$line")
  [ -n "$name" ] && [ -n "$id" ] || continue
  [ "$name" = testtool ] && continue
  if grep -q "$id" <<<"$registered"; then continue; fi
  echo "demo: registering tool $name:$version ($id)"
  ctl tool register --name "$name" --version "$version" --image "$id" >/dev/null
done <"$IMAGES"

agent="demo-$(date +%Y%m%d-%H%M%S)"
echo "demo: running specs/demo.yaml as $agent"
set +e
ctl run -f specs/demo.yaml --name "$agent" --wait
code=$?
set -e
cat <<EOT

Inspect the run:   $AGENTCTL inspect $agent
Step logs:         $AGENTCTL logs $agent --step summarize
Temporal Web UI:   http://localhost:$UI_PORT/namespaces/default/workflows/$agent
Stop everything:   $STOP
EOT
exit $code
