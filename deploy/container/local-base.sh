#!/usr/bin/env bash
# Builds the base image that `make image IMAGE_BASE=local` uses instead of
# the upstream bases (distroless, NVIDIA's DCGM image), for machines that
# cannot pull images (CI). A distroless-like root filesystem assembled from
# this machine: the shared libraries `ldd` lists for the given binaries,
# /etc/passwd and /etc/group of deploy/container/etc (user otelcol-gpu,
# 10001), the CA bundle (Debian's ca-certificates), the time zone database
# (tzdata), an empty /tmp (1777). No shell and no libdcgm.so.4, like the
# production gateway base; the agent on it shows the "no DCGM" behaviour.
#
#   deploy/container/local-base.sh IMAGE BINARY...
#
# BUILDAH and BUILDAH_FLAGS as in mk/image.mk.
set -euo pipefail

if [ $# -lt 2 ]; then
  echo "usage: $0 IMAGE BINARY..." >&2
  exit 2
fi
image=$1
shift
buildah=${BUILDAH:-buildah}
read -r -a flags <<<"${BUILDAH_FLAGS:---storage-driver vfs}"
here=$(cd "$(dirname "$0")" && pwd)

for f in /etc/ssl/certs/ca-certificates.crt /usr/share/zoneinfo/UTC; do
  if [ ! -e "$f" ]; then
    echo "$0: $f is missing: install the Debian packages ca-certificates and tzdata (make image-deps)" >&2
    exit 1
  fi
done

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT

# The dynamic loader and every library the binaries link, at the paths ldd
# resolved (the loader's path is fixed in the binaries' PT_INTERP).
libs=$(for b in "$@"; do
  if [ ! -x "$b" ]; then
    echo "$0: $b: no such executable (make build)" >&2
    exit 1
  fi
  ldd "$b" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'
done | sort -u)
for l in $libs; do
  install -D -m 0755 "$(readlink -f "$l")" "$root$l"
done

install -D -m 0644 "$here/etc/passwd" "$root/etc/passwd"
install -D -m 0644 "$here/etc/group" "$root/etc/group"
# Go's resolver reads it; without it, it would still try files first.
printf 'hosts: files dns\n' >"$root/etc/nsswitch.conf"
install -D -m 0644 /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
mkdir -p "$root/usr/share"
cp -a /usr/share/zoneinfo "$root/usr/share/zoneinfo"
install -d -m 1777 "$root/tmp"
install -d -m 0755 "$root/var/lib"

# One layer, the same bytes for the same inputs: sorted, no owners, fixed
# times.
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$root" -cf "$root.tar" .
trap 'rm -rf "$root" "$root.tar"' EXIT
ctr=$("$buildah" "${flags[@]}" from scratch)
"$buildah" "${flags[@]}" add "$ctr" "$root.tar" / >/dev/null
"$buildah" "${flags[@]}" config --os linux --arch "$(go env GOARCH 2>/dev/null || echo amd64)" \
  --label org.opencontainers.image.description="otelcol-gpu local base (deploy/container/local-base.sh)" "$ctr"
"$buildah" "${flags[@]}" commit --quiet --rm --timestamp 0 "$ctr" "$image" >/dev/null
echo "$image: $(echo "$libs" | wc -w) libraries from ldd, passwd, CA bundle, tzdata"
