#!/bin/sh
# /opt/kafka/bin/kafka-broker-api-versions.sh — Kafka's BrokerApiVersionsCommand.
exec "$(dirname "$0")/kafka-run-class.sh" org.apache.kafka.tools.BrokerApiVersionsCommand "$@"
