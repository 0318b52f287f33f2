#!/bin/sh
# /opt/kafka/bin/kafka-storage.sh format|info|random-uuid ... — Kafka's storage tool.
exec "$(dirname "$0")/kafka-run-class.sh" kafka.tools.StorageTool "$@"
