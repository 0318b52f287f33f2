#!/bin/sh
# /opt/kafka/bin/kafka-metadata-quorum.sh — Kafka's MetadataQuorumCommand.
exec "$(dirname "$0")/kafka-run-class.sh" org.apache.kafka.tools.MetadataQuorumCommand "$@"
