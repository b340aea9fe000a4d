# Trace and log backends of the end-to-end tests (docs/backends.md). Tempo
# and Loki, the production defaults, are AGPL and not served by the module
# proxy; Jaeger v2 (OTLP in, traces by id out) and VictoriaLogs (OTLP logs
# in, LogsQL out) are, under Apache-2.0, and stand in for them. Both are
# built from source into .tools/bin at pinned versions; the e2e tests fail
# with this target's name when either is missing.

# Jaeger v2's binary (cmd/jaeger) is released in the module's v1 line.
JAEGER_VERSION       := v1.76.0
VICTORIALOGS_VERSION := v1.52.1
JAEGER       := $(TOOLS_BIN)/jaeger
VICTORIALOGS := $(TOOLS_BIN)/victoria-logs
# node_exporter: its infiniband collector is what the agent's
# node_exporter naming is compared with (test/e2e/node_exporter_ib_test.go).
NODE_EXPORTER_VERSION := v1.12.1
NODE_EXPORTER         := $(TOOLS_BIN)/node_exporter

EXTRA_TOOLS += $(JAEGER) $(VICTORIALOGS) $(NODE_EXPORTER)

.PHONY: backends
backends: $(JAEGER) $(VICTORIALOGS)

# `go install github.com/jaegertracing/jaeger/cmd/jaeger@v1.76.0` refuses
# the module (its go.mod has a replace directive, for sarama), so the
# module is downloaded and built in place, with its own go.mod and go.sum:
# the versions Jaeger tested. Outside this repository's module (cd /), so
# that neither go.mod nor go.sum here changes.
$(JAEGER):
	@mkdir -p $(TOOLS_BIN)
	cd / && GOWORK=off GOFLAGS= $(GO) mod download github.com/jaegertracing/jaeger@$(JAEGER_VERSION)
	cd "$$(cd / && $(GO) env GOMODCACHE)/github.com/jaegertracing/jaeger@$(JAEGER_VERSION)" && \
	  GOWORK=off GOFLAGS=-mod=readonly $(GO) build -trimpath \
	    -ldflags "-X github.com/jaegertracing/jaeger/internal/version.latestVersion=$(JAEGER_VERSION)" \
	    -o $@ ./cmd/jaeger

$(VICTORIALOGS):
	GOBIN=$(TOOLS_BIN) $(GO) install github.com/VictoriaMetrics/VictoriaLogs/app/victoria-logs@$(VICTORIALOGS_VERSION)

$(NODE_EXPORTER):
	GOBIN=$(TOOLS_BIN) $(GO) install github.com/prometheus/node_exporter@$(NODE_EXPORTER_VERSION)

# The backends test (test/e2e/backends_test.go) needs both.
e2e-test: $(JAEGER) $(VICTORIALOGS) $(NODE_EXPORTER)
