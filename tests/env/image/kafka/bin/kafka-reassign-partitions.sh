#!/bin/sh
# /opt/kafka/bin/kafka-reassign-partitions.sh — Kafka's ReassignPartitionsCommand.
exec "$(dirname "$0")/kafka-run-class.sh" org.apache.kafka.tools.reassign.ReassignPartitionsCommand "$@"
