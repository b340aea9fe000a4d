# Packages and releases (docs/packages.md).
#
#   make packages   # .deb and .rpm of the agent, the gateway and the
#                   # all-in-one in $(DIST), built with nfpm
#   make release    # the packages, the binaries as .tar.gz (fr-analyze and
#                   # otelcol-gpu-ctl too, mk/fr-analyze.mk, mk/ctl.mk), a CycloneDX SBOM
#                   # per binary, the images as OCI archives (mk/image.mk),
#                   # and SHA256SUMS over all of them
#   make package-test  # after make release: installs the packages into
#                      # scratch roots and checks them and the rest of
#                      # $(DIST) (packaging/packages_test.go, tag packages)
#
# Every artifact is named with PKG_VERSION. On a commit tagged v$(VERSION)
# with a clean tree that is $(VERSION); any other build is a snapshot,
# $(VERSION)~git<commit time, UTC>.<commit>, which dpkg and rpm both sort
# before $(VERSION) (VERSION names the release being prepared: bump it right
# after tagging) and after older snapshots. The packages, the tarballs and
# the images take their file times from the commit (SOURCE_DATE_EPOCH): the
# same commit gives the same bytes.

NFPM_VERSION            := v2.45.2
CYCLONEDX_GOMOD_VERSION := v1.10.0
NFPM            := $(TOOLS_BIN)/nfpm
CYCLONEDX_GOMOD := $(TOOLS_BIN)/cyclonedx-gomod
EXTRA_TOOLS += $(NFPM) $(CYCLONEDX_GOMOD)

$(NFPM):
	GOBIN=$(TOOLS_BIN) $(GO) install github.com/goreleaser/nfpm/v2/cmd/nfpm@$(NFPM_VERSION)

$(CYCLONEDX_GOMOD):
	GOBIN=$(TOOLS_BIN) $(GO) install github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@$(CYCLONEDX_GOMOD_VERSION)

# The Makefile sets VERSION and COMMIT; these hold where it did not.
VERSION ?= $(shell cat $(CURDIR)/VERSION 2>/dev/null || echo 0.0.0)
COMMIT  ?= $(shell git -C $(CURDIR) rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
DIST    ?= dist
SOURCE_DATE_EPOCH ?= $(shell git -C $(CURDIR) log -1 --format=%ct 2>/dev/null || echo 0)

RELEASE_TAG    := $(shell git -C $(CURDIR) tag --points-at HEAD 2>/dev/null | grep -Fx 'v$(VERSION)')
COMMIT_TIME    := $(shell TZ=UTC git -C $(CURDIR) log -1 --format=%cd --date=format-local:%Y%m%d%H%M%S 2>/dev/null || echo 0)
# dpkg would read a "-" as the start of the Debian revision, and rpm refuses
# it: -dirty becomes .dirty.
PKG_VERSION    ?= $(if $(and $(RELEASE_TAG),$(filter-out %-dirty,$(COMMIT))),$(VERSION),$(VERSION)~git$(COMMIT_TIME).$(subst -,.,$(COMMIT)))
PKG_RELEASE    := 1
PKG_ARCH       ?= $(shell $(GO) env GOARCH)
RPM_ARCH        = $(or $(RPM_ARCH_$(PKG_ARCH)),$(PKG_ARCH))
RPM_ARCH_amd64 := x86_64
RPM_ARCH_arm64 := aarch64

# package = binary = packaging/<package>.yaml; the ocb build directory and
# the configs shipped beside the binary in its tarball.
RELEASE_PACKAGES := otelcol-gpu-agent otelcol-gpu-gateway otelcol-gpu
build_dir_otelcol-gpu-agent   := _build/agent
build_dir_otelcol-gpu-gateway := _build/gateway
build_dir_otelcol-gpu         := _build/otelcol-gpu
configs_otelcol-gpu-agent      = $(filter-out %/manifest.yaml,$(wildcard distributions/agent/*.yaml))
configs_otelcol-gpu-gateway    = $(filter-out %/manifest.yaml,$(wildcard distributions/gateway/*.yaml))
configs_otelcol-gpu            = $(wildcard distributions/otelcol-gpu/*.yaml)
# More binaries a package ships: the gateway's, the console's command line
# (mk/ctl.mk; one package owns a path, so the all-in-one has none: take it
# from the otelcol-gpu-ctl tarball).
package_bins_otelcol-gpu-gateway := bin/otelcol-gpu-ctl

deb_file     = $(DIST)/$(1)_$(PKG_VERSION)-$(PKG_RELEASE)_$(PKG_ARCH).deb
rpm_file     = $(DIST)/$(1)-$(PKG_VERSION)-$(PKG_RELEASE).$(RPM_ARCH).rpm
tarball_file = $(DIST)/$(1)_$(PKG_VERSION)_linux_$(PKG_ARCH).tar.gz
sbom_file    = $(DIST)/$(1)_$(PKG_VERSION)_linux_$(PKG_ARCH).cdx.json

DEBS     := $(foreach p,$(RELEASE_PACKAGES),$(call deb_file,$(p)))
RPMS     := $(foreach p,$(RELEASE_PACKAGES),$(call rpm_file,$(p)))
TARBALLS := $(foreach p,$(RELEASE_PACKAGES),$(call tarball_file,$(p)))
SBOMS    := $(foreach p,$(RELEASE_PACKAGES),$(call sbom_file,$(p)))
# mk/image.mk's archives (named with VERSION: an OCI tag has no "~").
RELEASE_IMAGE_ARCHIVES = $(foreach i,$(IMAGES),$(DIST)/$(i)_$(VERSION)_linux_$(IMAGE_ARCH).oci.tar)

# What goes into a package besides its binary.
PACKAGE_INPUTS := $(wildcard packaging/scripts/*.sh deploy/systemd/* deploy/slurm/*.sh deploy/slurm/slurm.env) \
	docs/packages.md LICENSE

.PHONY: packages release release-sboms release-tarballs package-test release-version

packages: $(DEBS) $(RPMS)

release-tarballs: $(TARBALLS)

release-sboms: $(SBOMS)

# Prints what the artifacts are named with (the package tests read it).
release-version:
	@echo '$(PKG_VERSION)'

release:
	$(MAKE) packages release-tarballs release-sboms image-archives fr-analyze-tarball ctl-tarball
	cd $(DIST) && sha256sum $(notdir $(DEBS) $(RPMS) $(TARBALLS) $(SBOMS) $(RELEASE_IMAGE_ARCHIVES) $(FR_ANALYZE_TARBALL) $(CTL_TARBALL)) > SHA256SUMS
	@echo "release $(PKG_VERSION) in $(DIST):"; cd $(DIST) && ls -l $(notdir $(DEBS) $(RPMS) $(TARBALLS) $(SBOMS) $(RELEASE_IMAGE_ARCHIVES) $(FR_ANALYZE_TARBALL) $(CTL_TARBALL)) SHA256SUMS

# The maintainer scripts with the package's name filled in.
_build/packaging/%/scripts: $(wildcard packaging/scripts/*.sh)
	@mkdir -p $@
	@for s in postinstall preremove postremove; do \
	  sed 's/@PACKAGE@/$*/g' packaging/scripts/$$s.sh > $@/$$s.sh && chmod 0755 $@/$$s.sh; \
	done
	@touch $@

# $(1): package
define package_rules
$(call deb_file,$(1)) $(call rpm_file,$(1)) &: packaging/$(1).yaml bin/$(1) $$(package_bins_$(1)) $$(configs_$(1)) $(PACKAGE_INPUTS) _build/packaging/$(1)/scripts | $(NFPM)
	@mkdir -p $(DIST)
	PKG_VERSION='$(PKG_VERSION)' NFPM_ARCH=$(PKG_ARCH) SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) \
	  $(NFPM) package --config packaging/$(1).yaml --packager deb --target $(call deb_file,$(1))
	PKG_VERSION='$(PKG_VERSION)' NFPM_ARCH=$(PKG_ARCH) SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) \
	  $(NFPM) package --config packaging/$(1).yaml --packager rpm --target $(call rpm_file,$(1))

# The binary with LICENSE, README.md and its configs, in a directory named
# like the tarball; owners, order and times fixed for the same bytes.
$(call tarball_file,$(1)): bin/$(1) LICENSE README.md $$(configs_$(1))
	@mkdir -p $(DIST)
	@set -e; t=$$$$(mktemp -d); n=$$(patsubst %.tar.gz,%,$$(notdir $$@)); \
	  install -d -m 0755 $$$$t/$$$$n; \
	  install -m 0755 bin/$(1) $$$$t/$$$$n/$(1); \
	  install -m 0644 LICENSE README.md $$$$t/$$$$n/; \
	  for c in $$(configs_$(1)); do install -m 0644 $$$$c $$$$t/$$$$n/$$$$(basename $$$$c); done; \
	  tar -C $$$$t --sort=name --mtime=@$(SOURCE_DATE_EPOCH) --owner=0 --group=0 --numeric-owner -cf - $$$$n | gzip -n > $$@; \
	  rm -rf $$$$t; echo $$@

# CycloneDX of the module ocb generated for this binary, "app" mode: the
# modules go list finds in the build of its main package, with go.sum's
# hashes, and this repository's module at the pseudo-version naming its
# commit ("bin" mode, reading the binary's build info, names that replaced
# module "../.." with no version). cyclonedx-gomod hashes a module replaced
# by a directory by reading every file under it, so the generated module is
# pointed at a copy of this repository's source (tracked and untracked
# files, nothing git ignores: no bin/, _build/, dist/ or tools), under
# _build, inside this checkout for the commit. -noserial -notimestamp: the
# same source gives the same SBOM.
$(call sbom_file,$(1)): bin/$(1) | $(CYCLONEDX_GOMOD)
	@mkdir -p $(DIST)
	@rm -rf _build/sbom/$(1) && mkdir -p _build/sbom/$(1)/src _build/sbom/$(1)/app
	@git ls-files -z --cached --others --exclude-standard | tar --null -T - --ignore-failed-read -cf - 2>/dev/null | tar -C _build/sbom/$(1)/src -xf -
	@cp $(build_dir_$(1))/go.mod $(build_dir_$(1))/go.sum $(build_dir_$(1))/*.go _build/sbom/$(1)/app/
	@sed -i 's#^replace github.com/otelcol-gpu/otelcol-gpu v0.0.0 => ../..$$$$#replace github.com/otelcol-gpu/otelcol-gpu v0.0.0 => ../src#' _build/sbom/$(1)/app/go.mod
	@grep -q '=> ../src$$$$' _build/sbom/$(1)/app/go.mod || { echo "$(build_dir_$(1))/go.mod: no replace of github.com/otelcol-gpu/otelcol-gpu => ../.. to point at the copy"; exit 1; }
	GOOS=linux GOARCH=$(PKG_ARCH) CGO_ENABLED=1 $(CYCLONEDX_GOMOD) app -json -licenses -noserial -notimestamp -output $$@ _build/sbom/$(1)/app
	@rm -rf _build/sbom/$(1)
endef
$(foreach p,$(RELEASE_PACKAGES),$(eval $(call package_rules,$(p))))

# Debian packages the package tests use, as command:package.
PACKAGE_TEST_DEPS := rpm:rpm dpkg-deb:dpkg systemd-analyze:systemd

# Checks what make release wrote (it does not run it: the images take
# minutes, and CI has just made them); fails naming any artifact missing.
package-test:
	@missing=""; for d in $(PACKAGE_TEST_DEPS); do command -v $${d%%:*} >/dev/null || missing="$$missing $${d#*:}"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing$$missing (Debian packages the package tests use)"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing; \
	fi
	DIST=$(abspath $(DIST)) PKG_VERSION='$(PKG_VERSION)' COMMIT='$(COMMIT)' SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) \
	  $(GO) test -count=1 -v -tags packages ./packaging/...
