# otelcol-gpu build, test and lint. Quick start (README.md):
#   make demo   # agents, Kafka and the gateway on loopback find an injected NVLink fault and straggler
#   make test   # unit tests, then the end-to-end test (agent -> Kafka -> gateway -> Prometheus)

SHELL := /bin/bash
.DEFAULT_GOAL := build

GO        ?= go
TOOLS_BIN := $(CURDIR)/.tools/bin

# What a build says it is: the release in VERSION and the commit it was built
# from (12 hex digits, -dirty when tracked files differ from it). Outside a
# git checkout (a source tarball, a container build context) COMMIT comes
# from the environment or the command line, else "unknown". mk/*.mk (images,
# packages, releases) use both; the binaries carry $(BUILD_VERSION) in
# --version and in their telemetry's service.version.
VERSION := $(shell cat $(CURDIR)/VERSION)
ifneq ($(wildcard $(CURDIR)/.git),)
COMMIT := $(shell git -C $(CURDIR) rev-parse --short=12 HEAD 2>/dev/null)$(shell git -C $(CURDIR) diff --quiet HEAD -- 2>/dev/null || echo -dirty)
endif
COMMIT ?= unknown
ifeq ($(COMMIT),)
COMMIT := unknown
endif
# Semantic versioning's build metadata: 0.2.0+0123456789ab.
BUILD_VERSION := $(VERSION)+$(COMMIT)
OCB_VERSION         := v0.165.0
STATICCHECK_VERSION := v0.8.2
# v5.8.3 needs Go 1.27.
KUSTOMIZE_VERSION   := v5.8.2
OCB         := $(TOOLS_BIN)/builder
STATICCHECK := $(TOOLS_BIN)/staticcheck
KUSTOMIZE   := $(TOOLS_BIN)/kustomize

# go-dcgm is served by the module proxy but unknown to the checksum database;
# go.sum pins it.
export GONOSUMDB := github.com/NVIDIA/go-dcgm
export CGO_ENABLED := 1
# go-nvml's headers mark NVML 12 calls deprecated in NVML 13; they still
# exist, and the source checks each symbol before calling it.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations

# Everything a collector binary is compiled from; a change to any of these
# rebuilds the binaries, no change leaves them alone.
GO_SOURCES := $(shell find receiver processor exporter connector extension internal -name '*.go' -not -name '*_test.go' 2>/dev/null) go.mod go.sum

BINARIES := bin/otelcol-gpu bin/otelcol-gpu-agent bin/otelcol-gpu-gateway

# Each concern beyond build and test keeps its targets in its own file
# (mk/*.mk: images, release, Helm chart, test backends); a file adds the Go
# tools it needs to EXTRA_TOOLS, which make tools installs.
EXTRA_TOOLS :=
include $(wildcard mk/*.mk)
# Debian packages the tests use, as command:package.
TEST_DEPS := python3:python3 prometheus:prometheus kcat:kcat chromium:chromium slurmctld:slurmctld slurmd:slurmd scontrol:slurm-client slurmrestd:slurmrestd

.PHONY: build tools run demo test unit-test platform-test envtest-bin e2e-test e2e-deps lint fmt clean fuzz bench detection soak console-screenshots

build: $(BINARIES)

tools: $(OCB) $(STATICCHECK) $(KUSTOMIZE) $(EXTRA_TOOLS)

$(OCB):
	GOBIN=$(TOOLS_BIN) $(GO) install go.opentelemetry.io/collector/cmd/builder@$(OCB_VERSION)

$(STATICCHECK):
	GOBIN=$(TOOLS_BIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

$(KUSTOMIZE):
	GOBIN=$(TOOLS_BIN) $(GO) install sigs.k8s.io/kustomize/kustomize/v5@$(KUSTOMIZE_VERSION)

# ocb generates a module under _build/<name> (replace => this repo) and
# compiles it; the Go build cache is shared by the three builds. ocb writes
# dist.version into the generated main.go as a constant, so each build runs
# ocb on a copy of its manifest (_build/<name>.manifest.yaml) whose
# dist.version is $(BUILD_VERSION). ocb builds with -trimpath and
# -ldflags='-s -w' and the generated module names this repo by a relative
# path: the same commit gives the same bytes in any directory.
define ocb_build
	@mkdir -p _build bin
	awk -v v='$(BUILD_VERSION)' '/^[^ #]/ { d = /^dist:/ } d && /^  version:/ { print "  version: " v; n++; next } { print } END { if (n != 1) { print "$(1): no dist.version to stamp" > "/dev/stderr"; exit 1 } }' $(1) > _build/$(notdir $(2)).manifest.yaml
	$(OCB) --config _build/$(notdir $(2)).manifest.yaml
	install -m 0755 $(2) $@
endef

# Rewritten only when VERSION or COMMIT changes, so a new commit restamps
# the binaries and an unchanged one leaves them alone.
_build/build-version: build-version-check
	@mkdir -p _build
	@echo '$(BUILD_VERSION)' | cmp -s - $@ || echo '$(BUILD_VERSION)' > $@
.PHONY: build-version-check
build-version-check:

bin/otelcol-gpu: builder-config.yaml _build/build-version $(GO_SOURCES) | $(OCB)
	$(call ocb_build,builder-config.yaml,_build/otelcol-gpu/otelcol-gpu)

bin/otelcol-gpu-agent: distributions/agent/manifest.yaml _build/build-version $(GO_SOURCES) | $(OCB)
	$(call ocb_build,distributions/agent/manifest.yaml,_build/agent/otelcol-gpu-agent)

bin/otelcol-gpu-gateway: distributions/gateway/manifest.yaml _build/build-version $(GO_SOURCES) | $(OCB)
	$(call ocb_build,distributions/gateway/manifest.yaml,_build/gateway/otelcol-gpu-gateway)

# The all-in-one binary on data shipped in the repo, printing what it
# collects: a real sysfs tree (procfs' fixture: mlx4, mlx5 with hw_counters,
# hfi1) and the flight recorder dumps of an 8-rank job with a straggler.
run: bin/otelcol-gpu
	SYSFS_ROOT=$${SYSFS_ROOT:-receiver/ibreceiver/testdata/procfs-sys} \
	NCCL_FR_DIR=$${NCCL_FR_DIR:-receiver/ncclflightreceiver/internal/frdump/testdata/dp8-straggler5-v2.10} \
	OTELCOL_GPU_STORAGE_DIR=$${OTELCOL_GPU_STORAGE_DIR:-$$(mktemp -d)} \
	IB_COLLECTION_INTERVAL=$${IB_COLLECTION_INTERVAL:-5s} \
	OTELCOL_GPU_DEBUG_VERBOSITY=$${OTELCOL_GPU_DEBUG_VERBOSITY:-detailed} \
	./bin/otelcol-gpu --config distributions/otelcol-gpu/config.yaml

# The whole pipeline on one machine, no GPU, no backend (README "Quick
# start"): a kfake broker, one agent per simulated node, the gateway, and the
# testbed's 64-rank job with an NVLink fault and a compute straggler. Stops
# by itself; DEMO_FLAGS passes cmd/demo flags (go run ./cmd/demo -h).
demo: build
	@mkdir -p _build
	$(GO) build -o _build/kfakebroker ./test/kfakebroker
	$(GO) build -o _build/demo ./cmd/demo
	./_build/demo $(DEMO_FLAGS)

test: unit-test platform-test e2e-test

unit-test:
	$(GO) test -race -count=1 ./...

# The remediation platforms against real servers: a kube-apiserver and etcd
# built from the module proxy (tools/envtest, kept in .tools/envtest-bin)
# and a Slurm controller with slurmd daemons from Debian; and every
# Kubernetes manifest of deploy/, rendered by kustomize and dry-run against
# that API server.
platform-test: envtest-bin e2e-deps $(KUSTOMIZE)
	$(GO) test -race -count=1 -timeout 20m -tags envtest,slurm ./exporter/... ./deploy/... ./receiver/dcgmreceiver/internal/podlabels/... ./extension/nodeauthextension/...

envtest-bin:
	tools/envtest/build.sh

# The end-to-end test runs the real binaries against a Kafka-protocol broker
# (kfake), a real Prometheus and kcat; it needs the Debian packages below.
e2e-test: build e2e-deps
	$(GO) test -p 1 -tags e2e -count=1 -v -timeout 40m ./test/e2e/... ./test/testbed/... ./test/loadtest/...

e2e-deps:
	@missing=""; for d in $(TEST_DEPS); do command -v $${d%%:*} >/dev/null || missing="$$missing $${d#*:}"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing$$missing (Debian packages the tests use)"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing; \
	  $$SUDO systemctl disable --now prometheus >/dev/null 2>&1 || true; \
	fi

# The docs check (test/docscheck) prints every stale statement as
# file:line: the repository paths Markdown and the YAML comments under
# distributions/ and deploy/ name, the count of dcgm built-in fields, and
# README.md's Components table against the ocb manifests.
lint: $(STATICCHECK)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) run ./test/docscheck
	$(GO) vet ./...
	$(GO) vet -tags e2e ./test/e2e/... ./test/testbed/... ./test/loadtest/...
	$(GO) vet -tags envtest,slurm ./exporter/... ./deploy/... ./receiver/dcgmreceiver/internal/podlabels/... ./extension/nodeauthextension/...
	$(GO) vet -tags image ./deploy/container/...
	$(GO) vet -tags packages ./packaging/...
	$(STATICCHECK) ./...
	$(STATICCHECK) -tags envtest,slurm ./exporter/... ./deploy/... ./receiver/dcgmreceiver/internal/podlabels/... ./extension/nodeauthextension/...
	$(STATICCHECK) -tags image ./deploy/container/...
	$(STATICCHECK) -tags packages ./packaging/...
	$(STATICCHECK) -tags e2e ./test/... ./cmd/...

fmt:
	gofmt -w $$(git ls-files '*.go')

# Fuzzing of every fuzz target in the tree, 10 minutes each (the parsers'
# targets also check that allocation stays within a multiple of the input);
# a quick pass: FUZZTIME=20s make fuzz. make test runs only the seed corpora.
# -fuzzminimizetime keeps large seeds from eating the whole budget.
FUZZTIME ?= 10m
fuzz:
	@set -e; grep -rl --include='*_test.go' '^func Fuzz' receiver processor exporter connector extension internal 2>/dev/null | xargs -n1 dirname | sort -u | while read -r dir; do \
	  for target in $$(grep -h '^func Fuzz' $$dir/*_test.go | sed 's/^func \(Fuzz[A-Za-z0-9_]*\).*/\1/'); do \
	    echo "== $$dir $$target"; \
	    $(GO) test -run '^$$' -fuzz "^$$target$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./$$dir/; \
	  done; \
	done

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./receiver/... ./processor/... ./connector/... ./extension/... ./internal/...
	$(MAKE) detection

# Detection quality (issue 6): the fault-injection suite at 64 and 1,024
# ranks over DETECTION_SEEDS runs each (issue 30), then the straggler
# scenarios at 16,384 ranks (step spans only above 512 ranks; test/testbed
# explains). CI runs the 64-rank suite once (TestSuite64Ranks).
DETECTION_SEEDS ?= 5
detection:
	$(GO) run ./cmd/gpusim -seeds $(DETECTION_SEEDS) -fail-below 0.95
	$(GO) run ./cmd/gpusim -ranks 1024 -seeds $(DETECTION_SEEDS) -fail-below 0.95
	$(GO) run ./cmd/gpusim -ranks 16384 -step 3s -seeds 1 -fail-below 0.95

# The end-to-end outage test with a long outage (E2E_OUTAGE, default 5m; CI: 60 s):
# nothing scraped while the broker is away may be lost.
E2E_OUTAGE ?= 5m
soak: build e2e-deps
	E2E_OUTAGE=$(E2E_OUTAGE) $(GO) test -tags e2e -count=1 -v -timeout 60m -run TestAgentKafkaGatewayPrometheus ./test/e2e/...

clean:
	rm -rf bin _build dist

# The fault console's pictures in docs/images/console/ (docs/console.md),
# taken by the browser tests: the demo's console and heatmap (TestDemo),
# the reset of a tripped breaker (TestConsoleBrowser, reset-flow/) and a
# node moving through the repair loop, another in rma
# (TestConsoleLifecycleBrowser, lifecycle/).
console-screenshots: build
	CONSOLE_SCREENSHOT_DIR=$(CURDIR)/docs/images/console $(GO) test -tags e2e -count=1 -run 'TestDemo$$|TestConsoleBrowser$$|TestConsoleLifecycleBrowser$$' ./test/e2e/
