#!/bin/sh
# /opt/kafka/bin/kafka-console-consumer.sh — Kafka's ConsoleConsumer.
exec "$(dirname "$0")/kafka-run-class.sh" org.apache.kafka.tools.consumer.ConsoleConsumer "$@"
