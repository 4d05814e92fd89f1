#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Build the project's Debian packages with Debian's own tooling:
#   qemu/deb.sh CACHE [OUTDIR]
#
# dpkg-buildpackage (debhelper, dh-dkms, dh-python) runs in a copy of the
# package's inputs under CACHE/deb/src, never in the work tree; the .debs go
# to CACHE/deb/out and are copied to OUTDIR (default: dist/ in the work
# tree).  The build is skipped when its inputs (the files listed below, by
# content) are those of the last build.  lintian runs over the result; its
# tags are checked by tests/test_packages.py.
set -euo pipefail

mkdir -p "$1"
cache=$(cd "$1" && pwd -P)
top=$(cd "$(dirname "$0")/.." && pwd)
outdir=${2:-$top/dist}
die() { echo "deb.sh: $*" >&2; exit 1; }
# Debian's python3 (pybuild), not one that happens to be first on PATH
export PATH=/usr/sbin:/usr/bin:/sbin:/bin:$PATH

for t in dpkg-buildpackage dh dh_dkms lintian; do
	command -v "$t" >/dev/null || die "$t missing: run make deps"
done

cd "$top"
inputs() { # the package's inputs, relative to the top of the tree
	find debian deploy modules -type f
	find collector/netoops_collector -name '*.py' -o -name '*.c' -o -path '*/templates/*' -type f
	echo collector/pyproject.toml
	echo collector/setup.py
	echo dkms.conf
	echo README.md
	echo LICENSE
}
files=$(inputs | grep -v -e '\.o$' -e '\.ko$' -e '\.cmd$' -e '/\.' | LC_ALL=C sort)
key=$( (echo "$files"; echo "$files" | xargs sha256sum) | sha256sum | cut -c1-16)
version=$(dpkg-parsechangelog -S Version)

exec 9>"$cache/.deb.lock"
flock 9
work=$cache/deb
if [ "$(cat "$work/out/.key" 2>/dev/null)" != "$key" ]; then
	echo "deb.sh: building the packages (dpkg-buildpackage, log $work/build.log)"
	rm -rf "$work"
	mkdir -p "$work/src/netoops-$version" "$work/out"
	echo "$files" | xargs cp --parents -t "$work/src/netoops-$version"
	(cd "$work/src/netoops-$version" &&
		dpkg-buildpackage -us -uc -b >"$work/build.log" 2>&1) ||
		{ tail -40 "$work/build.log"; die "dpkg-buildpackage failed: $work/build.log"; }
	mv "$work/src/"*.deb "$work/out/"
	# lintian's verdict, kept next to the packages (pedantic tags too)
	lintian --pedantic --tag-display-limit 0 "$work/out/"*.deb \
		>"$work/out/lintian.txt" 2>&1 || true
	echo "$key" >"$work/out/.key"
fi
mkdir -p "$outdir"
cp "$work/out/"*.deb "$outdir/"
ls "$outdir"/*.deb
