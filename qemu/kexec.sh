#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Debian's kexec-tools for the kdump guest test, never installed on the host:
#   qemu/kexec.sh CACHE
# downloads the package into CACHE/debs, unpacks it (dpkg-deb -x) into
# CACHE/kexec/, installs the library packages it depends on, and prints the
# path of its kexec binary.  Skipped when it is there already.
set -euo pipefail

cache=$(cd "$1" && pwd -P)
root=$cache/kexec
bin=$root/sbin/kexec
exec 9>"$cache/.kexec.lock"
flock 9
if [ ! -x "$bin" ]; then
	mkdir -p "$cache/debs"
	deb=$(ls "$cache/debs/kexec-tools_"*.deb 2>/dev/null | head -1 || true)
	if [ -z "$deb" ]; then
		echo "kexec.sh: downloading kexec-tools" >&2
		(cd "$cache/debs" && { apt-get download -qq kexec-tools 2>/dev/null ||
			{ apt-get update -qq && apt-get download -qq kexec-tools; }; })
		deb=$(ls "$cache/debs/kexec-tools_"*.deb | head -1)
	fi
	rm -rf "$root"
	mkdir -p "$root"
	dpkg-deb -x "$deb" "$root"
	[ -x "$bin" ] || { echo "kexec.sh: no sbin/kexec in $deb" >&2; exit 1; }
fi
# Its shared libraries (Debian's kexec links Xen's), installed on the host
# as plain library packages so that the initramfs can copy them.
missing() { ldd "$bin" | grep 'not found' || true; }
if [ -n "$(missing)" ]; then
	libs=$(dpkg-deb -f "$(ls "$cache/debs/kexec-tools_"*.deb | head -1)" Depends |
		tr ',' '\n' | sed 's/^ *//; s/[ (].*//' | grep '^lib' || true)
	echo "kexec.sh: installing $libs" >&2
	# shellcheck disable=SC2086
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $libs >/dev/null
	if [ -n "$(missing)" ]; then
		echo "kexec.sh: $bin still lacks libraries" >&2
		exit 1
	fi
fi
echo "$bin"
