#!/usr/bin/env bash
# Each principal may do what its role does and nothing more (README, Kafka principals). Run by the
# topics container as User:admin after create-topics.sh; adding an ACL that exists changes nothing.
set -euo pipefail
p=${TOPIC_PREFIX:-callscreen}
app=${APP_ID:-callscreen-worker}
acl() { /opt/kafka/bin/kafka-acls.sh --bootstrap-server "$BOOTSTRAP" --command-config "$ADMIN_CONFIG" --add "$@" >/dev/null; }
allow() { acl --allow-principal "User:$1" "${@:2}"; }

# Every role and admin command checks the topics at start (their partitions and configs) and reads end offsets.
for user in edge worker alerting shadow operator; do
  allow "$user" --operation Describe --operation DescribeConfigs --topic "$p." --resource-pattern-type prefixed
done

# The edge appends events and questions (and PATCH /v1/account's webhook.set to accounts, and shadow
# requests), reads the accounts view, its answers, the status heartbeats and the shadow runs. It reads no
# decisions, alerts or deliveries.
allow edge --operation Write --topic "$p.events" --topic "$p.queries" --topic "$p.accounts" --topic "$p.status" \
  --topic "$p.shadow"
allow edge --operation Read --topic "$p.accounts" --topic "$p.replies" --topic "$p.status" --topic "$p.shadow"

# Workers fold every topic, append facts, alerts, ticks, answers and heartbeats (and the log's identity
# to control, once), and own the Faust consumer groups and changelog topics of their app id (one per
# rebuild generation: app id, app id-gN).
allow worker --operation Read --topic "$p." --resource-pattern-type prefixed
allow worker --operation Write --topic "$p.events" --topic "$p.decisions" --topic "$p.alerts" \
  --topic "$p.replies" --topic "$p.status" --topic "$p.control"
allow worker --operation All --topic "$app" --group "$app" --resource-pattern-type prefixed

# The alerting role reads accounts (sealed secrets it opens with its key), alerts and deliveries, and
# appends deliveries and its heartbeats.
allow alerting --operation Read --topic "$p.accounts" --topic "$p.alerts" --topic "$p.deliveries"
allow alerting --operation Write --topic "$p.deliveries" --topic "$p.status"

# The shadow role reads the events and decisions topics (on a group of its own, never committed) and the
# shadow requests, and appends only to the shadow topic.
allow shadow --operation Read --topic "$p.events" --topic "$p.decisions" --topic "$p.shadow"
allow shadow --operation Write --topic "$p.shadow"
allow shadow --operation Read --group "$p.shadow-run"

# Admin commands append account changes, billing records and rebuild requests, and follow progress.
allow operator --operation Read --topic "$p.accounts" --topic "$p.control" --topic "$p.status"
allow operator --operation Write --topic "$p.accounts" --topic "$p.billing" --topic "$p.control"

# Analysts read the alerts topic, with consumer groups of their own (named analyst-…), and nothing else.
allow analyst --operation Read --operation Describe --topic "$p.alerts"
allow analyst --operation Read --group analyst- --resource-pattern-type prefixed
