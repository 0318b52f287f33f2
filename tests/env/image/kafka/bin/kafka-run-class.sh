#!/bin/sh
# /opt/kafka/bin/kafka-run-class.sh CLASS ARGS... — runs a Kafka class with the image's jars,
# honouring the environment variables of Apache Kafka's own script that kstretch's pods and
# users set: KAFKA_HEAP_OPTS, KAFKA_JVM_PERFORMANCE_OPTS, KAFKA_OPTS, KAFKA_LOG4J_OPTS,
# KAFKA_JMX_OPTS, EXTRA_ARGS (the test environment's image; mirrors apache/kafka's layout).
# Like apache/kafka's image it starts from a class archive (/opt/kafka/kafka.jsa, AppCDS, made
# when the image is built), which nearly halves a node's start-up CPU; a JVM that cannot use it
# says so and starts without.
base_dir=$(cd "$(dirname "$0")/.." && pwd)
: "${KAFKA_HEAP_OPTS:=-Xmx256M}"
: "${KAFKA_JVM_PERFORMANCE_OPTS:=-server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true}"
: "${KAFKA_LOG4J_OPTS:=-Dlog4j2.configurationFile=$base_dir/config/tools-log4j2.yaml}"
JAVA=${JAVA_HOME:+$JAVA_HOME/bin/}java
# The archive holds the class path it was made with: jars listed in one fixed order, not in
# whatever order a directory lists them.
classpath=
for jar in "$base_dir"/libs/*.jar; do classpath=${classpath:+$classpath:}$jar; done
cds=
[ -f "$base_dir/kafka.jsa" ] && cds="-XX:SharedArchiveFile=$base_dir/kafka.jsa"
# shellcheck disable=SC2086 # the *_OPTS variables are word lists by contract
exec "$JAVA" $KAFKA_HEAP_OPTS $KAFKA_JVM_PERFORMANCE_OPTS $KAFKA_JMX_OPTS $KAFKA_LOG4J_OPTS \
  $cds $KAFKA_OPTS -cp "$classpath${CLASSPATH:+:$CLASSPATH}" "$@"
