#!/bin/sh
# /opt/kafka/bin/kafka-topics.sh — Kafka's TopicCommand.
exec "$(dirname "$0")/kafka-run-class.sh" org.apache.kafka.tools.TopicCommand "$@"
