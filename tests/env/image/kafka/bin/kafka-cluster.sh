#!/bin/sh
# /opt/kafka/bin/kafka-cluster.sh — Kafka's ClusterTool.
exec "$(dirname "$0")/kafka-run-class.sh" org.apache.kafka.tools.ClusterTool "$@"
