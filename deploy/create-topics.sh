#!/usr/bin/env bash
# Creates the topics Callscreen expects, with their partition counts and cleanup policies, then the
# principals' ACLs (kafka-acls.sh). Runs as User:admin over SASL (deploy/sasl/admin.env).
# Source topics keep everything (the log is the truth); request/reply and status topics are short-lived.
set -euo pipefail
export ADMIN_CONFIG=/tmp/admin.properties
umask 077
cat >"$ADMIN_CONFIG" <<PROPERTIES
security.protocol=SASL_PLAINTEXT
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="$CALLSCREEN_KAFKA_SASL_USERNAME" password="$CALLSCREEN_KAFKA_SASL_PASSWORD";
PROPERTIES
kt() {
  /opt/kafka/bin/kafka-topics.sh --bootstrap-server "$BOOTSTRAP" --command-config "$ADMIN_CONFIG" --create --if-not-exists "$@"
}
for name in events accounts decisions alerts deliveries billing; do
  kt --topic "callscreen.$name" --partitions "$PARTITIONS" --config retention.ms=-1 --config cleanup.policy=delete
done
kt --topic callscreen.queries --partitions "$PARTITIONS" --config retention.ms=3600000
kt --topic callscreen.replies --partitions 8 --config retention.ms=3600000
kt --topic callscreen.status --partitions 1 --config retention.ms=3600000
kt --topic callscreen.control --partitions 1 --config retention.ms=-1
kt --topic callscreen.dead_letters --partitions 1 --config retention.ms=-1
kt --topic callscreen.shadow --partitions 1 --config retention.ms=-1
bash "$(dirname "$0")/kafka-acls.sh"
