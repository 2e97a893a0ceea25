#!/bin/sh
# MinIO in the compose stack: agentflow's bucket exists before the workers
# start (a worker refuses to start without it). A top-level directory of
# a single-drive MinIO's data path is a bucket.
set -eu
: "${MINIO_ROOT_USER:?set MINIO_ROOT_USER}" "${MINIO_ROOT_PASSWORD:?set MINIO_ROOT_PASSWORD}"
mkdir -p "/data/${MINIO_BUCKET:-agentflow}"
exec minio server /data --address :9000 --console-address :9001
