#!/usr/bin/env bash
# Creates the topics Callscreen expects, with their partition counts and cleanup policies.
# Source topics keep everything (the log is the truth); request/reply and status topics are short-lived.
set -euo pipefail
kt() { /opt/kafka/bin/kafka-topics.sh --bootstrap-server "$BOOTSTRAP" --create --if-not-exists "$@"; }
for name in events accounts decisions alerts deliveries billing; do
  kt --topic "callscreen.$name" --partitions "$PARTITIONS" --config retention.ms=-1 --config cleanup.policy=delete
done
kt --topic callscreen.queries --partitions "$PARTITIONS" --config retention.ms=3600000
kt --topic callscreen.replies --partitions 8 --config retention.ms=3600000
kt --topic callscreen.status --partitions 1 --config retention.ms=3600000
kt --topic callscreen.control --partitions 1 --config retention.ms=-1
