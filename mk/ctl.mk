# otelcol-gpu-ctl: the fault console's command line (extension/
# faultconsoleextension/README.md, "CLI"; docs/packages.md).
#
#   make ctl          # bin/otelcol-gpu-ctl, a static binary (no cgo: it runs
#                     # on any operator's machine, talks HTTP only)
#   make ctl-tarball  # $(DIST)/otelcol-gpu-ctl_<PKG_VERSION>_linux_<arch>.tar.gz,
#                     # built like mk/release.mk's tarballs
#
# The gateway package ships it as /usr/bin/otelcol-gpu-ctl, the gateway
# image too (mk/release.mk, mk/image.mk). Not version-stamped, as
# fr-analyze (mk/fr-analyze.mk): it has no --version; the console's status
# names the collector's version. The tarball's name is computed in the
# recipe: PKG_VERSION is defined in mk/release.mk.

CTL_PKG := ./cmd/otelcol-gpu-ctl
# What it is built from besides the components' sources: its own package
# (GO_SOURCES leaves cmd/ out), and this file: a binary built otherwise
# (with cgo) before this rule is rebuilt static.
CTL_SOURCES := $(wildcard cmd/otelcol-gpu-ctl/*.go)
# Recursive: expanded in recipes, after mk/release.mk defined its parts
# (make release lists it in SHA256SUMS).
CTL_TARBALL = $(DIST)/otelcol-gpu-ctl_$(PKG_VERSION)_linux_$(PKG_ARCH).tar.gz

.PHONY: ctl ctl-tarball

ctl: bin/otelcol-gpu-ctl

bin/otelcol-gpu-ctl: $(GO_SOURCES) $(CTL_SOURCES) mk/ctl.mk
	@mkdir -p bin
	CGO_ENABLED=0 $(GO) build -trimpath -o $@ $(CTL_PKG)

ctl-tarball: bin/otelcol-gpu-ctl LICENSE extension/faultconsoleextension/README.md
	@mkdir -p $(DIST)
	@set -e; n=$(patsubst %.tar.gz,%,$(notdir $(CTL_TARBALL))); t=$$(mktemp -d); \
	  install -d -m 0755 $$t/$$n; \
	  install -m 0755 bin/otelcol-gpu-ctl $$t/$$n/otelcol-gpu-ctl; \
	  install -m 0644 LICENSE $$t/$$n/; \
	  install -m 0644 extension/faultconsoleextension/README.md $$t/$$n/README.md; \
	  tar -C $$t --sort=name --mtime=@$(SOURCE_DATE_EPOCH) --owner=0 --group=0 --numeric-owner -cf - $$n | gzip -n > $(CTL_TARBALL); \
	  rm -rf $$t; echo $(CTL_TARBALL)
