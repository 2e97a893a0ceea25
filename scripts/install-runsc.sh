#!/usr/bin/env bash
# Install gVisor (runsc) and register it with the Docker daemon as the
# runtime "runsc", without restarting dockerd. Idempotent: safe to run on
# every CI run. Usage: scripts/install-runsc.sh   (as root)
#
# - installs the Debian package when /usr/bin/runsc is missing;
# - merges runtimes.runsc into /etc/docker/daemon.json, keeping every other
#   key (a backup of the previous file is left at daemon.json.bak);
# - sends SIGHUP to dockerd (it reloads runtimes; running containers are not
#   touched) and waits until `docker info` lists runsc.
#
# runtimeArgs (docs/security/gvisor.md): --network=none because our
# sandboxes have no network and this machine's kernel/netstack combination
# cannot set up gVisor's own; --oci-seccomp applies the container's OCI
# seccomp profile inside the sandbox too (the host-side seccomp filter of
# gVisor's Sentry always applies; this adds ours, so a tool sees the same
# refusals under both runtimes).
set -euo pipefail

RUNSC="${RUNSC:-/usr/bin/runsc}"
DAEMON_JSON="${DAEMON_JSON:-/etc/docker/daemon.json}"
ARGS_JSON='["--network=none", "--oci-seccomp"]'

if [ ! -x "$RUNSC" ]; then
  echo "install-runsc: installing runsc"
  if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq runsc; } >/tmp/install-runsc.apt.log 2>&1; then
    echo "install-runsc: apt-get install runsc failed; see /tmp/install-runsc.apt.log" >&2
    exit 1
  fi
  [ -x "$RUNSC" ] || { echo "install-runsc: $RUNSC missing after install" >&2; exit 1; }
fi

changed=$(RUNSC="$RUNSC" ARGS_JSON="$ARGS_JSON" DAEMON_JSON="$DAEMON_JSON" python3 - <<'PY'
import json, os, shutil
path = os.environ["DAEMON_JSON"]
want = {"path": os.environ["RUNSC"], "runtimeArgs": json.loads(os.environ["ARGS_JSON"])}
cfg = {}
if os.path.exists(path):
    with open(path) as f:
        text = f.read()
    cfg = json.loads(text) if text.strip() else {}
runtimes = cfg.setdefault("runtimes", {})
if runtimes.get("runsc") == want:
    print("no")
else:
    runtimes["runsc"] = want
    if os.path.exists(path):
        shutil.copyfile(path, path + ".bak")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)
    print("yes")
PY
)

listed() { docker info --format '{{json .Runtimes}}' 2>/dev/null | python3 -c 'import json,sys; r=json.load(sys.stdin); sys.exit(0 if "runsc" in r and "--network=none" in r["runsc"].get("runtimeArgs", []) and "--oci-seccomp" in r["runsc"].get("runtimeArgs", []) else 1)'; }

if [ "$changed" = yes ] || ! listed; then
  pid=$(pidof dockerd || true)
  [ -n "$pid" ] || { echo "install-runsc: dockerd is not running" >&2; exit 1; }
  echo "install-runsc: registering runsc with dockerd (SIGHUP $pid)"
  kill -HUP "$pid"
fi
for _ in $(seq 1 30); do
  listed && { echo "install-runsc: runsc registered ($("$RUNSC" --version | head -1))"; exit 0; }
  sleep 1
done
echo "install-runsc: dockerd does not list the runsc runtime after SIGHUP; check $DAEMON_JSON and the dockerd log" >&2
exit 1
