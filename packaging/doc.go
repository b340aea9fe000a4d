// Package packaging holds the tests of the .deb and .rpm packages, the
// tarballs, the SBOMs and SHA256SUMS that make release writes (build tag
// packages: make package-test). The nfpm configs and maintainer scripts
// beside it are what make packages builds from (docs/packages.md).
package packaging
