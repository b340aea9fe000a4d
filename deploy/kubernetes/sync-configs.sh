#!/usr/bin/env bash
# Copies the collector configs of the two distributions into the kustomize
# base, where configMapGenerator turns them into ConfigMaps (kustomize cannot
# read files outside its kustomization root). Run after every change to
# distributions/*/config.yaml; deploy/kubernetes/configs_test.go fails until
# the copies are byte-identical.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cp "$repo/distributions/agent/config.yaml" "$here/base/agent-config.yaml"
cp "$repo/distributions/gateway/config.yaml" "$here/base/gateway-config.yaml"
echo "synced agent-config.yaml and gateway-config.yaml into $here/base"
