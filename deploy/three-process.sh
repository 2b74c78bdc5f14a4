#!/usr/bin/env bash
# A three-process shardtail deployment on one host, for trying it out:
# one role-all server (writes, DDL, materialized views, the dataflow path)
# and two tail processes, all on shared S3-compatible storage and a
# PostgreSQL consensus. Put HAProxy (deploy/haproxy.cfg) in front of the
# tails. Set BLOB and CONSENSUS first, for example:
#   BLOB='s3://shardtail/prod?endpoint=http://127.0.0.1:9000&region=us-east-1&path_style=true'
#   CONSENSUS='postgres://shardtail@127.0.0.1:5432/shardtail'
set -euo pipefail
: "${BLOB:?set BLOB to an s3:// URL}"
: "${CONSENSUS:?set CONSENSUS to a postgres:// URL}"
BIN=${BIN:-./bin/shardtail}

"$BIN" serve --blob "$BLOB" --consensus "$CONSENSUS" \
    --listen 127.0.0.1:7000 --http-listen 127.0.0.1:7100 --feed-listen 127.0.0.1:7200 &
sleep 1
# Peers: a CancelRequest that the load balancer sends to the other tail is
# forwarded to the one running the statement.
PEERS=1=127.0.0.1:7001,2=127.0.0.1:7002
for i in 1 2; do
  "$BIN" serve --blob "$BLOB" --consensus "$CONSENSUS" --upstream 127.0.0.1:7000 \
      --listen 127.0.0.1:700$i --http-listen 127.0.0.1:710$i --feed-listen 127.0.0.1:720$i \
      --peer-id $i --peers "$PEERS" &
done
wait
