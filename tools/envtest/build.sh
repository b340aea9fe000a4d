#!/usr/bin/env bash
# Builds the envtest control plane (kube-apiserver and etcd) from the Go
# module proxy into <repo>/.tools/envtest-bin (git-ignored). A binary already
# there is reused; delete it (or pass -f) to rebuild. kube-apiserver takes
# about 7 minutes on 2 cores the first time, etcd about a minute.
#
#   tools/envtest/build.sh [-f]
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
out="${ENVTEST_BIN_DIR:-$repo/.tools/envtest-bin}"
force=0
[[ "${1:-}" == "-f" ]] && force=1
mkdir -p "$out"

build() { # build <module dir> <package> <binary name> [ldflags]
	local dir=$1 pkg=$2 name=$3 ldflags=${4:-}
	if [[ $force == 0 && -x "$out/$name" ]]; then
		echo "envtest: $out/$name present, reusing"
		return
	fi
	echo "envtest: building $name from $pkg"
	local start=$SECONDS
	# -trimpath and no VCS stamping keep the build reproducible; CGO off
	# gives static binaries that run on any CI image.
	(cd "$dir" && CGO_ENABLED=0 GOFLAGS=-mod=readonly go build -trimpath -buildvcs=false \
		-ldflags "$ldflags" -o "$out/$name.tmp" "$pkg")
	mv "$out/$name.tmp" "$out/$name"
	echo "envtest: built $out/$name in $((SECONDS - start))s"
}

build "$here/etcd" go.etcd.io/etcd/server/v3 etcd
# Stamp the version (kube-apiserver --version and /version) as the release
# build would; unstamped it reports v0.0.0-master.
k8s_version=v1.37.2
build "$here" k8s.io/kubernetes/cmd/kube-apiserver kube-apiserver \
	"-X k8s.io/component-base/version.gitVersion=$k8s_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37"
