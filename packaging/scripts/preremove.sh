#!/bin/sh
# @PACKAGE@: deb prerm and rpm %preun, from packaging/scripts/preremove.sh.
# On removal (not on upgrade) stops and disables the service.
set -e

pkg=@PACKAGE@
unit=$pkg.service
root=${DPKG_ROOT:-}

case "${1:-}" in
remove | 0) ;;
*) exit 0 ;;
esac

if [ -z "$root" ] && [ -d /run/systemd/system ]; then
	systemctl --no-reload disable --now "$unit" || true
elif command -v systemctl >/dev/null 2>&1; then
	# Not running (another root, or no systemd booted): only the
	# enablement symlinks the administrator may have made.
	systemctl ${root:+--root="$root"} --no-reload disable "$unit" >/dev/null 2>&1 || true
fi
