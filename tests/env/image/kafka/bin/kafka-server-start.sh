#!/bin/sh
# /opt/kafka/bin/kafka-server-start.sh server.properties — runs a Kafka node in the foreground.
[ $# -ge 1 ] || { echo "USAGE: $0 server.properties [--override property=value]*" >&2; exit 1; }
base_dir=$(dirname "$0")/..
: "${KAFKA_LOG4J_OPTS:=-Dlog4j2.configurationFile=$base_dir/config/log4j2.yaml}"
: "${KAFKA_HEAP_OPTS:=-Xmx1G -Xms1G}"
export KAFKA_LOG4J_OPTS KAFKA_HEAP_OPTS
exec "$base_dir/bin/kafka-run-class.sh" $EXTRA_ARGS kafka.Kafka "$@"
