#!/bin/sh
# PostgreSQL in the compose stack (image agentflow/postgres, from Debian's
# postgresql package): initialise the data directory on first start — the
# superuser's password from POSTGRES_PASSWORD, SCRAM for every network
# client, no password-less network access — then run the server in the
# foreground as PID 1, so `docker stop` is a clean shutdown (SIGTERM).
set -eu
: "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  pw=$(mktemp)
  printf '%s\n' "$POSTGRES_PASSWORD" >"$pw"
  initdb -D "$PGDATA" --username=postgres --encoding=UTF8 --locale=C \
    --auth-local=trust --auth-host=scram-sha-256 --pwfile="$pw" >/tmp/initdb.log 2>&1 ||
    { cat /tmp/initdb.log >&2; rm -f "$pw"; exit 1; }
  rm -f "$pw"
  # Any address on the stack's network, with the password; the container's
  # own socket stays trust (only this container's processes reach it).
  printf 'host all all all scram-sha-256\n' >>"$PGDATA/pg_hba.conf"
  echo "postgres: initialised $PGDATA"
fi
exec postgres -D "$PGDATA" -c listen_addresses='*' -c unix_socket_directories=/var/run/postgresql
