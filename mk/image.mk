# Container images of the three distributions (deploy/container/README.md),
# built with buildah as root: vfs storage and chroot isolation work on
# machines without overlayfs or a usable OCI runtime (CI).
#
#   make image                    # production bases (distroless, NVIDIA's DCGM
#                                 # image), the binaries built in golang images
#   make image IMAGE_BASE=local   # CI: a base assembled from this machine
#                                 # (deploy/container/local-base.sh) and the
#                                 # binaries of bin/, built by the same rule
#   make image-archives           # each image as an OCI archive in $(DIST)
#   make image-test               # builds (IMAGE_BASE=local) and checks them
#
# One Containerfile per image serves both modes through build arguments
# (BASE, BINARY_SOURCE), so the two cannot drift.

IMAGE_BASE     ?= upstream
IMAGE_REGISTRY ?= ghcr.io/otelcol-gpu
# OCI tags allow no "+": the tag is the release, the commit is the
# org.opencontainers.image.revision label.
IMAGE_TAG      ?= $(VERSION)
IMAGE_ARCH     ?= $(shell $(GO) env GOARCH)
DIST           ?= dist
BUILDAH        ?= buildah
BUILDAH_FLAGS  ?= --storage-driver vfs
LOCAL_BASE_IMAGE := localhost/otelcol-gpu-base:local
# Image and layer times are the commit's, so the same commit gives the same
# image; org.opencontainers.image.created says the same.
SOURCE_DATE_EPOCH ?= $(shell git -C $(CURDIR) log -1 --format=%ct 2>/dev/null || echo 0)
IMAGE_CREATED = $(shell date -u -d @$(SOURCE_DATE_EPOCH) +%Y-%m-%dT%H:%M:%SZ)
# Debian packages the image targets use, as command-or-file:package.
IMAGE_DEPS := buildah:buildah /etc/ssl/certs/ca-certificates.crt:ca-certificates /usr/share/zoneinfo/UTC:tzdata

# Production bases and the build stage's Go image: empty keeps the
# Containerfile's pinned default; set one to pin a digest you verified
# (AGENT_BASE_IMAGE=nvcr.io/nvidia/cloud-native/dcgm@sha256:...) or to build
# the agent for a host-mounted DCGM library (README.md, "DCGM").
AGENT_BASE_IMAGE ?=
BASE_IMAGE       ?=
GO_IMAGE         ?=

# image name -> Containerfile and binary
IMAGES := otelcol-gpu-agent otelcol-gpu-gateway otelcol-gpu
image_containerfile = deploy/container/$(patsubst otelcol-gpu-%,%,$(1)).Containerfile
# More binaries of bin/ an image holds (IMAGE_BASE=local): the gateway's,
# the fault console's command line (mk/ctl.mk). Static: not given to
# local-base.sh, which collects the shared libraries of $(BINARIES).
image_bins_otelcol-gpu-gateway := bin/otelcol-gpu-ctl

ifeq ($(IMAGE_BASE),local)
IMAGE_BUILD_ARGS := --build-arg BASE=$(LOCAL_BASE_IMAGE) --build-arg BINARY_SOURCE=host
IMAGE_IGNOREFILE := deploy/container/host.containerignore
IMAGE_PREREQS     = bin/$(1) $(image_bins_$(1)) image-local-base
else ifeq ($(IMAGE_BASE),upstream)
# Stated although it is the Containerfiles' default: buildah picks the stages
# to build from the --build-arg values, not from ARG defaults.
IMAGE_BUILD_ARGS  = --build-arg BINARY_SOURCE=build \
  $(if $(GO_IMAGE),--build-arg GO_IMAGE=$(GO_IMAGE)) \
  $(if $(filter otelcol-gpu-agent,$(1)),$(if $(AGENT_BASE_IMAGE),--build-arg BASE=$(AGENT_BASE_IMAGE)),$(if $(BASE_IMAGE),--build-arg BASE=$(BASE_IMAGE)))
IMAGE_IGNOREFILE := deploy/container/build.containerignore
IMAGE_PREREQS     =
else
$(error IMAGE_BASE=$(IMAGE_BASE): use upstream (the default) or local)
endif

.PHONY: image image-deps image-local-base image-archives image-push image-test image-vars $(addprefix image-,$(IMAGES))

image: $(addprefix image-,$(IMAGES))

image-deps:
	@missing=""; for d in $(IMAGE_DEPS); do c=$${d%%:*}; \
	  if [ "$${c#/}" != "$$c" ]; then [ -e "$$c" ] || missing="$$missing $${d#*:}"; \
	  else command -v $$c >/dev/null || missing="$$missing $${d#*:}"; fi; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing$$missing (Debian packages the image targets use)"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing; \
	fi

image-local-base: $(BINARIES) image-deps
	BUILDAH='$(BUILDAH)' BUILDAH_FLAGS='$(BUILDAH_FLAGS)' deploy/container/local-base.sh $(LOCAL_BASE_IMAGE) $(BINARIES)

# $(1): image name. --layers caches each step (a rebuild with the same
# binaries takes seconds) and, with --force-rm, removes the working
# container of the binary stage, which buildah 1.28 leaves behind otherwise.
define image_rule
image-$(1): $(call IMAGE_PREREQS,$(1)) | image-deps
	$(BUILDAH) $(BUILDAH_FLAGS) build --isolation chroot --layers --force-rm --timestamp $(SOURCE_DATE_EPOCH) \
	  --ignorefile $(IMAGE_IGNOREFILE) -f $(call image_containerfile,$(1)) \
	  --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) --build-arg CREATED=$(IMAGE_CREATED) \
	  $(call IMAGE_BUILD_ARGS,$(1)) -t $(IMAGE_REGISTRY)/$(1):$(IMAGE_TAG) .
endef
$(foreach i,$(IMAGES),$(eval $(call image_rule,$(i))))

# For the release: dist/otelcol-gpu-agent_0.2.0_linux_amd64.oci.tar, ...
# (podman load -i / skopeo copy oci-archive:...).
image-archives: image
	@mkdir -p $(DIST)
	@set -e; for i in $(IMAGES); do \
	  a=$(DIST)/$${i}_$(VERSION)_linux_$(IMAGE_ARCH).oci.tar; rm -f $$a; \
	  $(BUILDAH) $(BUILDAH_FLAGS) push --quiet $(IMAGE_REGISTRY)/$$i:$(IMAGE_TAG) oci-archive:$$a:$(IMAGE_REGISTRY)/$$i:$(IMAGE_TAG); \
	  echo "$$a"; \
	done

# Into a cluster: push the images to the registry its nodes pull from, then
# set the chart's image.registry (deploy/README.md, "Kubernetes"):
#
#   make image-push REGISTRY=registry.example.com/otelcol-gpu
#
# Each image goes to $(REGISTRY)/<name>:$(IMAGE_TAG); its digest is written to
# $(DIST)/<name>.digest and printed as <name>@sha256:..., to pin in the
# chart (images.<agent|gateway>.digest). With REGISTRY=<host>/otelcol-gpu the
# chart finds them under global.imageRegistry=<host>. Credentials: buildah's (buildah login, or
# REGISTRY_AUTH_FILE). IMAGE_PUSH_TLS_VERIFY=false only for a registry on
# loopback or a lab network.
IMAGE_PUSH_TLS_VERIFY ?= true

image-push: image
	@test -n "$(REGISTRY)" || { echo "image-push: set REGISTRY=host[:port][/path], the registry your cluster pulls from" >&2; exit 1; }
	@mkdir -p $(DIST)
	@set -e; for i in $(IMAGES); do \
	  $(BUILDAH) $(BUILDAH_FLAGS) push --quiet --tls-verify=$(IMAGE_PUSH_TLS_VERIFY) --digestfile $(DIST)/$$i.digest \
	    $(IMAGE_REGISTRY)/$$i:$(IMAGE_TAG) docker://$(REGISTRY)/$$i:$(IMAGE_TAG); \
	  echo "$(REGISTRY)/$$i:$(IMAGE_TAG) $(REGISTRY)/$$i@$$(cat $(DIST)/$$i.digest)"; \
	done

# The image check (deploy/container/image_test.go): builds the images on the
# local base with this Makefile (make image IMAGE_BASE=local, reading the
# names below through image-vars), then runs each binary inside its image.
# The timeout only guards CI against a hang; the build may recompile the
# binaries.
image-test: image-deps
	$(GO) test -count=1 -v -timeout 60m -tags image ./deploy/container/...

# What the image check needs to know, as NAME=value lines.
image-vars:
	@echo 'VERSION=$(VERSION)'
	@echo 'COMMIT=$(COMMIT)'
	@echo 'IMAGE_REGISTRY=$(IMAGE_REGISTRY)'
	@echo 'IMAGE_TAG=$(IMAGE_TAG)'
	@echo 'IMAGE_CREATED=$(IMAGE_CREATED)'
	@echo 'BUILDAH=$(BUILDAH)'
	@echo 'BUILDAH_FLAGS=$(BUILDAH_FLAGS)'
