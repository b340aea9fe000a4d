#!/usr/bin/env bash
# Copies the collector configs of the two distributions, their Kafka
# TLS/SASL fragments and the agent's OTLP auth fragment into the kustomize
# base, where configMapGenerator turns them into ConfigMaps (kustomize
# cannot read files outside its kustomization root). Run after every change
# to distributions/*/config.yaml, distributions/*/kafka-tls-sasl.yaml or
# distributions/agent/otlp-auth.yaml; deploy/kubernetes/configs_test.go
# fails until the copies are byte-identical.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
for distribution in agent gateway; do
	cp "$repo/distributions/$distribution/config.yaml" "$here/base/$distribution-config.yaml"
	cp "$repo/distributions/$distribution/kafka-tls-sasl.yaml" "$here/base/$distribution-kafka-tls-sasl.yaml"
done
cp "$repo/distributions/agent/otlp-auth.yaml" "$here/base/agent-otlp-auth.yaml"
echo "synced {agent,gateway}-config.yaml, {agent,gateway}-kafka-tls-sasl.yaml and agent-otlp-auth.yaml into $here/base"
