#!/bin/sh
# /opt/kafka/bin/kafka-features.sh — Kafka's FeatureCommand.
exec "$(dirname "$0")/kafka-run-class.sh" org.apache.kafka.tools.FeatureCommand "$@"
