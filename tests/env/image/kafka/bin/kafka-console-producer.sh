#!/bin/sh
# /opt/kafka/bin/kafka-console-producer.sh — Kafka's ConsoleProducer.
exec "$(dirname "$0")/kafka-run-class.sh" org.apache.kafka.tools.ConsoleProducer "$@"
