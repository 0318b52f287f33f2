#!/bin/sh
# /opt/kafka/bin/kafka-run-class.sh CLASS ARGS... — runs a Kafka class with the image's jars,
# honouring the environment variables of Apache Kafka's own script that kstretch's pods and
# users set: KAFKA_HEAP_OPTS, KAFKA_JVM_PERFORMANCE_OPTS, KAFKA_OPTS, KAFKA_LOG4J_OPTS,
# KAFKA_JMX_OPTS, EXTRA_ARGS (the test environment's image; mirrors apache/kafka's layout).
base_dir=$(dirname "$0")/..
: "${KAFKA_HEAP_OPTS:=-Xmx256M}"
: "${KAFKA_JVM_PERFORMANCE_OPTS:=-server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true}"
: "${KAFKA_LOG4J_OPTS:=-Dlog4j2.configurationFile=$base_dir/config/tools-log4j2.yaml}"
JAVA=${JAVA_HOME:+$JAVA_HOME/bin/}java
# shellcheck disable=SC2086 # the *_OPTS variables are word lists by contract
exec "$JAVA" $KAFKA_HEAP_OPTS $KAFKA_JVM_PERFORMANCE_OPTS $KAFKA_JMX_OPTS $KAFKA_LOG4J_OPTS \
  $KAFKA_OPTS -cp "$base_dir/libs/*${CLASSPATH:+:$CLASSPATH}" "$@"
