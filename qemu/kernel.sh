#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Prepare and build the patched Linux 6.1 tree for one flavour.
#
#   qemu/kernel.sh CACHE FLAVOUR
#
# CACHE holds everything (never tracked by git):
#   src/<version>/       the pristine tree unpacked from Debian's linux-source-6.1
#   linux/               the working tree: pristine + core-hooks/series applied
#   out/<flavour>/       O= build output (bzImage, modules, Module.symvers)
#
# The build is keyed on the tarball version, the content of the patch series
# and the config fragments; with the key unchanged nothing runs.  A changed
# patch only rewrites the files whose content changed, so make rebuilds
# incrementally.
set -euo pipefail

mkdir -p "$1"
cache=$(cd "$1" && pwd)
flavour=$2
top=$(cd "$(dirname "$0")/.." && pwd)
series=$top/core-hooks/series
jobs=${JOBS:-$(nproc)}
tarball=/usr/src/linux-source-6.1.tar.xz

die() { echo "kernel.sh: $*" >&2; exit 1; }

case $flavour in
debug|plain) ;;
*) die "unknown flavour '$flavour' (debug or plain)" ;;
esac

need_pkgs=()
[ -f "$tarball" ] || need_pkgs+=(linux-source-6.1)
for t in gcc make bc bison flex pahole; do
	command -v $t >/dev/null || need_pkgs+=(build-essential bc bison flex dwarves)
done
[ -f /usr/include/libelf.h ] || need_pkgs+=(libelf-dev)
[ -f /usr/include/openssl/ssl.h ] || need_pkgs+=(libssl-dev)
command -v xz >/dev/null || need_pkgs+=(xz-utils)
if [ ${#need_pkgs[@]} -gt 0 ]; then
	echo "kernel.sh: installing ${need_pkgs[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
		$(printf '%s\n' "${need_pkgs[@]}" | sort -u) >/dev/null
fi

version=$(dpkg-query -W -f '${Version}' linux-source-6.1)
mkdir -p "$cache/src" "$cache/out"

# One build at a time per cache: a second caller waits, then finds it done.
exec 9>"$cache/.kernel.lock"
flock 9

# 1. Pristine tree, one per tarball version.
pristine=$cache/src/$version
if [ ! -f "$pristine/.unpacked" ]; then
	echo "kernel.sh: unpacking linux-source-6.1 $version"
	rm -rf "$cache/src" "$cache/linux" "$cache/out"
	mkdir -p "$pristine" "$cache/out"
	tar -C "$pristine" --strip-components=1 -xf "$tarball"
	touch "$pristine/.unpacked"
fi

# 2. Working tree with the series applied.  The patch list and the patches'
# content make the series key.
patches=()
if [ -f "$series" ]; then
	while read -r p; do
		p=${p%%#*}
		p=$(echo "$p" | xargs)
		[ -n "$p" ] || continue
		[ -f "$top/core-hooks/$p" ] || die "series names missing patch $p"
		patches+=("$top/core-hooks/$p")
	done <"$series"
fi
series_key=$( { echo "$version"; for p in "${patches[@]}"; do
	basename "$p"; cat "$p"; done; } | sha256sum | cut -d' ' -f1)

tree=$cache/linux
files_of() { # the paths a patch touches (old and new names)
	grep -E '^(\+\+\+|---) ' "$1" | awk '{print $2}' |
		grep -v '^/dev/null$' | sed 's|^[ab]/||' | sort -u
}
if [ ! -d "$tree" ]; then
	echo "kernel.sh: creating working tree"
	cp -al "$pristine" "$tree.tmp" 2>/dev/null || cp -a "$pristine" "$tree.tmp"
	# Hard links are broken below for every file a patch rewrites.
	printf '' >"$tree.tmp/.netoops-series-files"
	echo none >"$tree.tmp/.netoops-series-key"
	mv "$tree.tmp" "$tree"
fi
if [ "$(cat "$tree/.netoops-series-key")" != "$series_key" ]; then
	echo "kernel.sh: applying core-hooks/series (${#patches[@]} patches)"
	stage=$(mktemp -d "$cache/stage.XXXXXX")
	trap 'rm -rf "$stage"' EXIT
	new_files=$(for p in "${patches[@]}"; do files_of "$p"; done | sort -u)
	all_files=$( { cat "$tree/.netoops-series-files"; echo "$new_files"; } |
		grep -v '^$' | sort -u || true)
	for f in $all_files; do
		if [ -e "$pristine/$f" ]; then
			mkdir -p "$stage/$(dirname "$f")"
			cp -p "$pristine/$f" "$stage/$f"
		fi
	done
	for p in "${patches[@]}"; do
		patch -d "$stage" -p1 -s --fuzz=0 --no-backup-if-mismatch <"$p" ||
			die "$(basename "$p") does not apply"
	done
	changed=0
	for f in $all_files; do
		if [ -e "$stage/$f" ]; then
			if ! cmp -s "$stage/$f" "$tree/$f"; then
				mkdir -p "$tree/$(dirname "$f")"
				rm -f "$tree/$f"	# break a hard link to pristine
				cp "$stage/$f" "$tree/$f"
				changed=$((changed + 1))
			fi
		elif [ -e "$tree/$f" ]; then
			rm -f "$tree/$f"
			changed=$((changed + 1))
		fi
	done
	echo "$new_files" >"$tree/.netoops-series-files"
	echo "$series_key" >"$tree/.netoops-series-key"
	echo "kernel.sh: $changed files changed"
fi

# 3. Configure and build the flavour.
out=$cache/out/$flavour
mkdir -p "$out"
frags=("$top/qemu/config/base.config" "$top/qemu/config/$flavour.config")
config_key=$(cat "${frags[@]}" | sha256sum | cut -d' ' -f1)
key="$version $series_key $config_key"
if [ -f "$out/.netoops-key" ] && [ "$(cat "$out/.netoops-key")" = "$key" ] &&
   [ -f "$out/arch/x86/boot/bzImage" ]; then
	echo "kernel.sh: $flavour kernel up to date"
	exit 0
fi

if [ ! -f "$out/.netoops-config-key" ] ||
   [ "$(cat "$out/.netoops-config-key")" != "$config_key" ]; then
	echo "kernel.sh: configuring $flavour"
	cat "${frags[@]}" >"$out/netoops.config"
	make -s -C "$tree" O="$out" KCONFIG_ALLCONFIG="$out/netoops.config" \
		allnoconfig >/dev/null
	# Every option the fragments ask for must have survived Kconfig.
	bad=0
	while IFS= read -r line; do
		case $line in
		CONFIG_*=n)
			opt=${line%%=*}
			if grep -q "^$opt=" "$out/.config"; then
				echo "kernel.sh: $opt is set, wanted off" >&2; bad=1
			fi ;;
		CONFIG_*)
			grep -qxF "$line" "$out/.config" ||
				{ echo "kernel.sh: $line did not take" >&2; bad=1; } ;;
		esac
	done <"$out/netoops.config"
	[ $bad = 0 ] || die "config fragment does not apply"
	echo "$config_key" >"$out/.netoops-config-key"
fi

echo "kernel.sh: building $flavour kernel (make -j$jobs)"
start=$(date +%s)
make -s -C "$tree" O="$out" -j"$jobs" bzImage modules
echo "kernel.sh: $flavour built in $(( $(date +%s) - start ))s"
echo "$key" >"$out/.netoops-key"
