#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Build the guest initramfs for one flavour:
#   qemu/mkinitramfs.sh CACHE FLAVOUR
# It holds static busybox, qemu/init, the out-of-tree modules as
# /lib/modules/nto/*.ko, the in-tree netconsole.ko (the reference peer) as
# /lib/modules/ref/netconsole.ko and every tests/guest/* script under /tests.
#
# For the patched flavours it also builds initramfs-<flavour>-kdump.cpio for
# the kdump test: the same, plus Debian's kexec (qemu/kexec.sh) and its
# libraries, the flavour's bzImage as /boot/bzImage and, as
# /boot/capture.cpio, a small initramfs for the capture kernel (busybox,
# /init, /tests), and initramfs-<flavour>-udev.cpio for the udev test: the
# same as the plain one plus Debian's udev (qemu/udev.sh).
set -euo pipefail

cache=$(cd "$1" && pwd -P)
flavour=$2
top=$(cd "$(dirname "$0")/.." && pwd)
out=$cache/out/$flavour
mod=${STOCK_MOD:-$cache/mod/$flavour}
busybox=/bin/busybox
# ldd fails on a static binary; the guest has no shared libraries.
if [ ! -x "$busybox" ] || ldd "$busybox" >/dev/null 2>&1; then
	echo "mkinitramfs: $busybox is not static busybox (busybox-static)" >&2
	exit 1
fi

gen=$cache/gen_init_cpio
if [ ! -x "$gen" ] || [ "$cache/linux/usr/gen_init_cpio.c" -nt "$gen" ]; then
	gcc -O2 -o "$gen" "$cache/linux/usr/gen_init_cpio.c"
fi

spec=$(mktemp)
stripped=$(mktemp -d)
trap 'rm -rf "$spec" "$stripped"' EXIT
{
	for d in /bin /sbin /usr /usr/bin /usr/sbin /dev /proc /sys /tmp /run \
		 /lib /lib/modules /lib/modules/nto /lib/modules/ref /tests; do
		echo "dir $d 755 0 0"
	done
	echo "nod /dev/console 600 0 0 c 5 1"
	echo "file /bin/busybox $busybox 755 0 0"
	echo "slink /bin/sh busybox 777 0 0"
	echo "file /init $top/qemu/init 755 0 0"
	for ko in "$mod"/modules/*.ko "$mod"/tests/kmod/*.ko; do
		[ -f "$ko" ] || continue
		# The debug kernel's modules carry line tables (for the
		# collector's --symbols on the host); the guest needs none.
		objcopy --strip-debug "$ko" "$stripped/$(basename "$ko")"
		echo "file /lib/modules/nto/$(basename "$ko") $stripped/$(basename "$ko") 644 0 0"
	done
	ref=$out/drivers/net/netconsole.ko
	# Debian's kernel (qemu/stock.sh): its own modules, loaded by /init in
	# the order of /lib/modules/stock/order, and its netconsole.ko as the
	# reference peer
	if [ -n "${STOCK_KDIR:-}" ]; then
		ref=$STOCK_KDIR/kernel/drivers/net/netconsole.ko
		echo "dir /lib/modules/stock 755 0 0"
		while read -r m; do
			echo "file /lib/modules/stock/$(basename "$m") $STOCK_KDIR/$m 644 0 0"
		done <"$STOCK_ORDER"
		sed 's|.*/||' "$STOCK_ORDER" >"$cache/stock/order"
		echo "file /lib/modules/stock/order $cache/stock/order 644 0 0"
	fi
	[ -f "$ref" ] && echo "file /lib/modules/ref/netconsole.ko $ref 644 0 0"
	for f in "$top"/tests/guest/*; do
		[ -f "$f" ] || continue
		echo "file /tests/$(basename "$f") $f 755 0 0"
	done
} >"$spec"
"$gen" -t 0 "$spec" >"$cache/initramfs-$flavour.cpio.tmp"
mv "$cache/initramfs-$flavour.cpio.tmp" "$cache/initramfs-$flavour.cpio"
echo "mkinitramfs: $cache/initramfs-$flavour.cpio ($(grep -c '^file' "$spec") files)"

[ -n "${STOCK_KDIR:-}" ] && exit 0

# The shared libraries of the binaries given, at the paths ldd names, after
# the directories they need (parents first) that $spec lacks.
libs_of() {
	libs=$(for b; do ldd "$b"; done | grep -o '/[^ ]*' | sort -u)
	for lib in $libs; do
		d=$(dirname "$lib")
		while [ "$d" != / ]; do echo "$d"; d=$(dirname "$d"); done
	done | sort -u | while read -r d; do
		grep -qx "dir $d 755 0 0" "$spec" || echo "dir $d 755 0 0"
	done
	for lib in $libs; do
		echo "file $lib $(readlink -f "$lib") 755 0 0"
	done
}

# initramfs-<flavour>-udev.cpio: Debian's systemd-udevd and udevadm
# (qemu/udev.sh), the rules that set ID_SERIAL, scsi_id, and the project's
# example rule as /usr/share/netoops/61-disk-alias.rules.
udev=$(bash "$top/qemu/udev.sh" "$cache")
uspec=$(mktemp)
trap 'rm -f "$spec" "$uspec"' EXIT
{
	cat "$spec"
	for d in /etc /etc/udev /etc/udev/rules.d /lib/systemd /lib/udev \
		 /lib/udev/rules.d /usr/share /usr/share/netoops; do
		echo "dir $d 755 0 0"
	done
	echo "file /bin/udevadm $udev/bin/udevadm 755 0 0"
	echo "slink /lib/systemd/systemd-udevd /bin/udevadm 777 0 0"
	echo "file /lib/udev/scsi_id $udev/lib/udev/scsi_id 755 0 0"
	for r in 50-udev-default 60-block 60-persistent-storage; do
		echo "file /lib/udev/rules.d/$r.rules $udev/lib/udev/rules.d/$r.rules 644 0 0"
	done
	echo "file /usr/share/netoops/61-disk-alias.rules $top/udev/61-disk-alias.rules 644 0 0"
	libs_of "$udev/bin/udevadm" "$udev/lib/udev/scsi_id"
} >"$uspec"
"$gen" -t 0 "$uspec" >"$cache/initramfs-$flavour-udev.cpio.tmp"
mv "$cache/initramfs-$flavour-udev.cpio.tmp" "$cache/initramfs-$flavour-udev.cpio"
echo "mkinitramfs: $cache/initramfs-$flavour-udev.cpio"
kexec=$(bash "$top/qemu/kexec.sh" "$cache")
capture=$(mktemp)
kspec=$(mktemp)
trap 'rm -f "$spec" "$uspec" "$capture" "$kspec"' EXIT
# The capture kernel's initramfs: what /init needs to run a /tests script
grep -E '^(dir|nod|slink) |^file /(bin/busybox|init|tests/)' "$spec" >"$kspec"
"$gen" -t 0 "$kspec" >"$capture"
{
	cat "$spec"
	echo "dir /boot 755 0 0"
	echo "file /sbin/kexec $kexec 755 0 0"
	echo "file /boot/bzImage $out/arch/x86/boot/bzImage 644 0 0"
	echo "file /boot/capture.cpio $capture 644 0 0"
	libs_of "$kexec"
} >"$kspec"
"$gen" -t 0 "$kspec" >"$cache/initramfs-$flavour-kdump.cpio.tmp"
mv "$cache/initramfs-$flavour-kdump.cpio.tmp" "$cache/initramfs-$flavour-kdump.cpio"
echo "mkinitramfs: $cache/initramfs-$flavour-kdump.cpio"
