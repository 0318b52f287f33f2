#!/bin/sh
# tests/env/image/kafka-class-archive.sh PORT — owns: making the Kafka image's class archive
# (/opt/kafka/kafka.jsa). Run by install.sh as root inside a chroot of the image's own root
# (the archive is valid only for the JVM that made it, and for jars of the same size and
# time): it formats and starts a single-node KRaft cluster on 127.0.0.1:PORT and PORT+1, and
# stops it once it serves, the JVM writing every class it loaded on the way out.
set -eu
port=${1:?usage: kafka-class-archive.sh PORT}
dir=$(mktemp -d)
cat >"$dir/server.properties" <<CONFIG
process.roles=broker,controller
node.id=0
controller.quorum.voters=0@127.0.0.1:$((port + 1))
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$((port + 1))
controller.listener.names=CONTROLLER
log.dirs=$dir/log
offsets.topic.replication.factor=1
CONFIG
export KAFKA_HEAP_OPTS=-Xmx256m
/opt/kafka/bin/kafka-storage.sh format --cluster-id AAAAAAAAAAAAAAAAAAAAAA --config "$dir/server.properties" >"$dir/format.log" 2>&1 ||
  { cat "$dir/format.log" >&2; exit 1; }
KAFKA_OPTS="-XX:ArchiveClassesAtExit=/opt/kafka/kafka.jsa -Xlog:cds=off -Xlog:cds+dynamic=off" \
  /opt/kafka/bin/kafka-server-start.sh "$dir/server.properties" >"$dir/server.log" 2>&1 &
pid=$!
tries=0
until grep -q "Kafka Server started" "$dir/server.log"; do
  tries=$((tries + 1))
  if [ $tries -gt 1200 ] || ! kill -0 $pid 2>/dev/null; then
    tail -n 30 "$dir/server.log" >&2
    echo "kafka-class-archive: the training node did not start" >&2
    exit 1
  fi
  sleep 0.1
done
# What a node loads in its first seconds of serving (group coordinator, log cleaner...) too.
sleep 3
kill $pid
wait $pid || true
[ -s /opt/kafka/kafka.jsa ] || { tail -n 30 "$dir/server.log" >&2; echo "kafka-class-archive: no archive written" >&2; exit 1; }
rm -rf "$dir"
