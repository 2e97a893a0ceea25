#!/bin/sh
# The full Temporal server in the compose stack, with "auto-setup" of its
# schema as upstream's temporalio/auto-setup image does: wait for
# PostgreSQL, create the two databases when missing, bring both schemas to
# this release's version (the tool applies only the versions a database
# lacks, so a restart changes nothing), then run the server as PID 1.
# SKIP_SCHEMA_SETUP=true skips the first part (a schema managed elsewhere).
set -eu
: "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}"
host=${POSTGRES_SEEDS:-postgres}
port=${POSTGRES_PORT:-5432}
export SQL_PASSWORD="$POSTGRES_PASSWORD" # the schema tool's variable: not in argv

sql() { # database args...
  db=$1
  shift
  temporal-sql-tool --plugin postgres12 --ep "$host" -p "$port" -u postgres --db "$db" "$@"
}

if [ "${SKIP_SCHEMA_SETUP:-false}" != true ]; then
  tries=0
  until sql postgres create-database >/tmp/schema.log 2>&1 || grep -q 'already exists' /tmp/schema.log; do
    tries=$((tries + 1))
    if [ "$tries" -ge 120 ]; then
      echo "temporal: PostgreSQL at $host:$port not ready after 120 s:" >&2
      cat /tmp/schema.log >&2
      exit 1
    fi
    sleep 1
  done
  for pair in temporal:temporal temporal_visibility:visibility; do
    db=${pair%%:*}
    dir=/etc/temporal/schema/postgresql/v12/${pair#*:}/versioned
    if ! { sql "$db" create-database || true; } >>/tmp/schema.log 2>&1 ||
      ! sql "$db" setup-schema -v 0.0 >>/tmp/schema.log 2>&1 ||
      ! sql "$db" update-schema -d "$dir" >>/tmp/schema.log 2>&1; then
      echo "temporal: schema of $db failed:" >&2
      cat /tmp/schema.log >&2
      exit 1
    fi
  done
  echo "temporal: schema of temporal and temporal_visibility is current"
fi
exec temporal-server --root /etc/temporal --config config --env development --allow-no-auth start
