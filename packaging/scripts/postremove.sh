#!/bin/sh
# @PACKAGE@: deb postrm and rpm %postun, from packaging/scripts/postremove.sh.
# Tells systemd the unit is gone. The otelcol-gpu user and
# /var/lib/otelcol-gpu (queues, offsets, the remediation audit log) are
# kept, purge included: they may be shared with the other otelcol-gpu
# package and hold data (docs/packages.md).
set -e

case "${1:-}" in
remove | purge | 0) ;;
*) exit 0 ;;
esac

if [ -z "${DPKG_ROOT:-}" ] && [ -d /run/systemd/system ]; then
	systemctl daemon-reload || true
fi
