#!/bin/sh
# /opt/kafka/bin/connect-distributed.sh worker.properties — runs a Kafka Connect worker.
[ $# -ge 1 ] || { echo "USAGE: $0 connect-distributed.properties" >&2; exit 1; }
base_dir=$(dirname "$0")/..
: "${KAFKA_LOG4J_OPTS:=-Dlog4j2.configurationFile=$base_dir/config/connect-log4j2.yaml}"
: "${KAFKA_HEAP_OPTS:=-Xms256M -Xmx2G}"
export KAFKA_LOG4J_OPTS KAFKA_HEAP_OPTS
exec "$base_dir/bin/kafka-run-class.sh" $EXTRA_ARGS org.apache.kafka.connect.cli.ConnectDistributed "$@"
