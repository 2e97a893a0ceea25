#!/usr/bin/env bash
# Builds agentflow/agentctl:dev, the image docker-compose.yml runs (Temporal
# dev server and worker), from the static binaries in bin/. Nothing is pulled:
# the image is a `docker import` of a tiny rootfs (FROM scratch in effect).
set -euo pipefail
cd "$(dirname "$0")/.."

for b in bin/agentctl bin/agentctl-engine bin/temporal; do
  [ -x "$b" ] || { echo "build-image: $b missing (make build temporal)" >&2; exit 1; }
  if file "$b" 2>/dev/null | grep -q "dynamically linked"; then
    echo "build-image: $b is dynamically linked; rebuild it with CGO_ENABLED=0" >&2
    exit 1
  fi
done

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/bin" "$root/tmp" "$root/data" "$root/etc"
chmod 1777 "$root/tmp"
cp bin/agentctl bin/agentctl-engine bin/temporal "$root/bin/"
printf 'root:x:0:0:root:/:/bin/agentctl\n' >"$root/etc/passwd"
printf 'root:x:0:\n' >"$root/etc/group"

tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$root" -cf - . |
  docker import \
    --change 'ENTRYPOINT ["/bin/agentctl"]' \
    --change 'CMD ["--help"]' \
    --change 'WORKDIR /data' \
    --change 'LABEL org.agentflow.component=agentctl' \
    - agentflow/agentctl:dev >/dev/null
echo "build-image: agentflow/agentctl:dev $(docker image inspect -f '{{.Id}}' agentflow/agentctl:dev)"
