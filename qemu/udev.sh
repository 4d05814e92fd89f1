#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Debian's udev for the udev guest test, never installed on the host:
#   qemu/udev.sh CACHE
# downloads the udev package into CACHE/debs, unpacks it (dpkg-deb -x) into
# CACHE/udev/, installs the plain library packages its binaries link if the
# host lacks them, and prints the unpacked root.  Skipped when it is there.
set -euo pipefail

cache=$(cd "$1" && pwd -P)
root=$cache/udev
bin=$root/bin/udevadm
exec 9>"$cache/.udev.lock"
flock 9
if [ ! -x "$bin" ]; then
	mkdir -p "$cache/debs"
	deb=$(ls "$cache/debs/udev_"*.deb 2>/dev/null | head -1 || true)
	if [ -z "$deb" ]; then
		echo "udev.sh: downloading udev" >&2
		(cd "$cache/debs" && { apt-get download -qq udev 2>/dev/null ||
			{ apt-get update -qq && apt-get download -qq udev; }; })
		deb=$(ls "$cache/debs/udev_"*.deb | head -1)
	fi
	rm -rf "$root"
	mkdir -p "$root"
	dpkg-deb -x "$deb" "$root"
	[ -x "$bin" ] || { echo "udev.sh: no bin/udevadm in $deb" >&2; exit 1; }
fi
missing() { ldd "$bin" "$root/lib/udev/scsi_id" | grep 'not found' || true; }
if [ -n "$(missing)" ]; then
	libs=$(dpkg-deb -f "$(ls "$cache/debs/udev_"*.deb | head -1)" Depends |
		tr ',' '\n' | sed 's/^ *//; s/[ (].*//' | grep '^lib' || true)
	echo "udev.sh: installing $libs" >&2
	# shellcheck disable=SC2086
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $libs >/dev/null
	if [ -n "$(missing)" ]; then
		echo "udev.sh: $bin still lacks libraries" >&2
		exit 1
	fi
fi
echo "$root"
