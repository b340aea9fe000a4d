#!/bin/sh
# @PACKAGE@: deb postinst and rpm %post, from packaging/scripts/postinstall.sh
# (mk/release.mk fills in the package's name). Creates the otelcol-gpu user
# and, for the agent, the dump directories, and tells systemd about the
# unit. It does NOT enable or start the service: the endpoints in
# /etc/otelcol-gpu/*.env are examples until the administrator edits them
# (docs/packages.md).
set -e

pkg=@PACKAGE@
unit=$pkg.service

# deb: "configure" and the previously configured version (empty on a first
# install); rpm: how many versions are installed now (1: a first install).
upgrade=
case "${1:-}" in
configure) upgrade=${2:-} ;;
abort-*) exit 0 ;;
[0-9]*) [ "$1" -lt 2 ] || upgrade=yes ;;
esac

# dpkg --root with --force-script-chrootless runs this script outside the
# target root with DPKG_ROOT set: everything goes into that root, and the
# running system's systemd is none of this package's business.
root=${DPKG_ROOT:-}

# The user both units run as (/usr/lib/sysusers.d/$pkg.conf).
systemd-sysusers ${root:+--root="$root"} "$pkg.conf"

if [ -n "$root" ] || [ ! -d /run/systemd/system ]; then
	# Installed into another root, or a system not booted with systemd (a
	# container build): systemd creates the tmpfiles.d directories at boot.
	exit 0
fi
if [ -e "/usr/lib/tmpfiles.d/$pkg.conf" ]; then
	systemd-tmpfiles --create "$pkg.conf" || true
fi
systemctl daemon-reload
# An upgrade restarts a running service on the new binary; a stopped or
# never-started one stays as it was.
if [ -n "$upgrade" ]; then
	systemctl try-restart "$unit" || true
fi
