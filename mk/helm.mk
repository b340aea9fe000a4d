# The Helm chart (deploy/helm/otelcol-gpu), the one definition of the
# Kubernetes deployment. Its tests (deploy/kubernetes) render it with the
# helm CLI and dry-run every object against the envtest kube-apiserver
# (make platform-test), and helm-install it there.
HELM_VERSION := v3.22.0
HELM         := $(TOOLS_BIN)/helm
HELM_CHART   := deploy/helm/otelcol-gpu
# Every tested variant: the defaults, each values file of ci/, and
# production with OTLP auth layered on it (as deploy/README.md installs it).
HELM_VALUES_SETS := "" \
	$(foreach f,$(wildcard $(HELM_CHART)/ci/*-values.yaml),"-f $(f)") \
	"-f $(HELM_CHART)/ci/production-values.yaml -f $(HELM_CHART)/ci/production-otlp-auth-values.yaml"

EXTRA_TOOLS += $(HELM)

.PHONY: helm-lint helm-template helm-sync

$(HELM):
	GOBIN=$(TOOLS_BIN) $(GO) install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)

# helm lint --strict over every values set.
helm-lint: $(HELM)
	@set -e; for v in $(HELM_VALUES_SETS); do \
	  echo "== helm lint $(HELM_CHART) $$v"; \
	  $(HELM) lint --strict $(HELM_CHART) $$v; \
	done

# helm template of every values set into _build/helm/<name>.yaml, the
# manifests a `helm install` would create (kubectl apply -f works too).
helm-template: $(HELM)
	@set -e; mkdir -p _build/helm; for v in $(HELM_VALUES_SETS); do \
	  name=$$(echo "$$v" | sed -e 's|-f $(HELM_CHART)/ci/||g' -e 's|-values.yaml||g' -e 's| |+|g'); \
	  name=$${name:-default}; \
	  $(HELM) template otelcol-gpu $(HELM_CHART) --namespace otelcol-gpu $$v >_build/helm/$$name.yaml; \
	  echo "_build/helm/$$name.yaml: $$(grep -c '^kind:' _build/helm/$$name.yaml) objects"; \
	done

# Copy the configs, RBAC, rules and dashboards into the chart and
# regenerate deploy/kubernetes/rendered (a test fails until they match).
helm-sync: $(HELM)
	HELM=$(HELM) deploy/helm/sync.sh

# The chart's tests render it with helm: the deploy/kubernetes tests in
# unit-test, and the dry runs and helm install in platform-test.
unit-test platform-test: $(HELM)
