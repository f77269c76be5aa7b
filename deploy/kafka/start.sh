#!/usr/bin/env bash
# The docker-compose.kafka.yml broker: formats its log on the first start with a SCRAM-SHA-512
# credential for every principal in /deploy/sasl/*.env, then runs Kafka on deploy/kafka/server.properties.
# A log that is already formatted keeps its users: add one later with kafka-configs.sh --alter
# --add-config 'SCRAM-SHA-512=[password=…]' --entity-type users --entity-name NAME.
set -euo pipefail
config=/deploy/kafka/server.properties
scram=()
for file in /deploy/sasl/*.env; do
  name=$(sed -n 's/^CALLSCREEN_KAFKA_SASL_USERNAME=//p' "$file")
  password=$(sed -n 's/^CALLSCREEN_KAFKA_SASL_PASSWORD=//p' "$file")
  scram+=(--add-scram "SCRAM-SHA-512=[name=$name,password=$password]")
done
/opt/kafka/bin/kafka-storage.sh format --ignore-formatted --cluster-id "$CLUSTER_ID" --config "$config" "${scram[@]}" >/dev/null
exec /opt/kafka/bin/kafka-server-start.sh "$config"
