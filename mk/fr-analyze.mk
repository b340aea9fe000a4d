# fr-analyze: the ncclflight receiver's cross-rank analysis of PyTorch
# flight recorder dumps, offline (receiver/ncclflightreceiver/README.md,
# "Offline: fr-analyze").
#
#   make fr-analyze          # bin/fr-analyze, a static binary (no cgo: it
#                            # is copied to wherever the dumps are)
#   make fr-analyze-tarball  # $(DIST)/fr-analyze_<PKG_VERSION>_linux_<arch>.tar.gz,
#                            # built like mk/release.mk's tarballs
#
# The tarball's name is computed in the recipe: PKG_VERSION is defined in
# mk/release.mk, which may be included after this file.

FR_ANALYZE_PKG := ./receiver/ncclflightreceiver/cmd/fr-analyze
# Recursive: expanded in recipes, after mk/release.mk defined its parts
# (make release lists it in SHA256SUMS).
FR_ANALYZE_TARBALL = $(DIST)/fr-analyze_$(PKG_VERSION)_linux_$(PKG_ARCH).tar.gz

.PHONY: fr-analyze fr-analyze-tarball

fr-analyze: bin/fr-analyze

bin/fr-analyze: $(GO_SOURCES)
	@mkdir -p bin
	CGO_ENABLED=0 $(GO) build -trimpath -o $@ $(FR_ANALYZE_PKG)

fr-analyze-tarball: bin/fr-analyze LICENSE
	@mkdir -p $(DIST)
	@set -e; n=$(patsubst %.tar.gz,%,$(notdir $(FR_ANALYZE_TARBALL))); t=$$(mktemp -d); \
	  install -d -m 0755 $$t/$$n; \
	  install -m 0755 bin/fr-analyze $$t/$$n/fr-analyze; \
	  install -m 0644 LICENSE $$t/$$n/; \
	  install -m 0644 receiver/ncclflightreceiver/README.md $$t/$$n/README.md; \
	  tar -C $$t --sort=name --mtime=@$(SOURCE_DATE_EPOCH) --owner=0 --group=0 --numeric-owner -cf - $$n | gzip -n > $(FR_ANALYZE_TARBALL); \
	  rm -rf $$t; echo $(FR_ANALYZE_TARBALL)
