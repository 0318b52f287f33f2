#!/bin/sh
# /opt/kafka/bin/kafka-configs.sh — Kafka's ConfigCommand.
exec "$(dirname "$0")/kafka-run-class.sh" kafka.admin.ConfigCommand "$@"
