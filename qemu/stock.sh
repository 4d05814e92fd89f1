#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Debian's own, unpatched 6.1 kernel for the stock-kernel tests:
#   qemu/stock.sh CACHE
#
# - finds the ABI of Debian's current 6.1 kernel (linux-image-amd64),
# - installs the matching linux-headers package on the host (headers only:
#   nothing is loaded here) and builds the modules against it, W=1 -Werror,
# - downloads linux-image-<abi>-amd64-unsigned into CACHE/debs and unpacks
#   it (dpkg-deb -x) into CACHE/stock/<release>/,
# - builds CACHE/initramfs-stock.cpio: busybox, qemu/init, the package's
#   own modules the guests need (virtio_pci, virtio_net, e1000, e1000e,
#   vmxnet3, configfs, veth, bridge, 8021q, macvlan and their
#   dependencies, loaded by /init in order), its
#   netconsole.ko as the reference peer, and our modules built against its
#   headers.
#
# CACHE/stock/kernel is the vmlinuz to boot, CACHE/stock/release its release.
# Every step is skipped when its output is there for the same release.
set -euo pipefail

mkdir -p "$1"
cache=$(cd "$1" && pwd -P)
top=$(cd "$(dirname "$0")/.." && pwd)
die() { echo "stock.sh: $*" >&2; exit 1; }

abi_of() { # the linux-image-<abi>-amd64 that linux-image-amd64 depends on
	apt-cache depends linux-image-amd64 2>/dev/null |
		sed -n 's/^ *Depends: linux-image-\(6\.1\.0-[0-9]*\)-amd64$/\1/p' |
		head -1
}
abi=$(abi_of)
if [ -z "$abi" ]; then
	apt-get update -qq
	abi=$(abi_of)
fi
[ -n "$abi" ] || die "no Debian 6.1 kernel found (apt-cache depends linux-image-amd64)"
rel=$abi-amd64

exec 9>"$cache/.stock.lock"
flock 9

# 1. Headers, on the host, as a DKMS user would have them
if [ ! -e "/lib/modules/$rel/build/Makefile" ]; then
	echo "stock.sh: installing linux-headers-$rel"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
		"linux-headers-$rel" >/dev/null
fi

# 2. The kernel image package, unpacked
root=$cache/stock/$rel
if [ ! -f "$root/.unpacked" ]; then
	mkdir -p "$cache/debs"
	deb=$(ls "$cache/debs/linux-image-$rel-unsigned_"*.deb 2>/dev/null | head -1 || true)
	if [ -z "$deb" ]; then
		echo "stock.sh: downloading linux-image-$rel-unsigned"
		(cd "$cache/debs" && apt-get download -qq "linux-image-$rel-unsigned")
		deb=$(ls "$cache/debs/linux-image-$rel-unsigned_"*.deb | head -1)
	fi
	rm -rf "$root"
	mkdir -p "$root"
	dpkg-deb -x "$deb" "$root"
	# modules.dep is made at install time: make it for the unpacked tree
	depmod -b "$root" "$rel"
	touch "$root/.unpacked"
fi
ln -sfn "$rel/boot/vmlinuz-$rel" "$cache/stock/kernel"
echo "$rel" >"$cache/stock/release"

# 3. Our modules against Debian's headers
mod=$cache/mod/stock
bash "$top/qemu/copy-modules.sh" "$top" "$mod"
make -s -C "/lib/modules/$rel/build" M="$mod" W=1 KCFLAGS=-Werror modules 2>&1 |
	grep -v '^Skipping BTF generation' || true
for m in modules/netpoll_targets modules/netconsole modules/netoops tests/kmod/nto_crash; do
	[ -f "$mod/$m.ko" ] || die "$m.ko did not build against linux-headers-$rel"
done

# 4. The package's modules the guests need, with their dependencies, in
# load order (a dependency before the modules that need it)
kdir=$root/lib/modules/$rel
order=$cache/stock/modules.order
/usr/bin/python3 - "$kdir/modules.dep" virtio_pci virtio_net e1000 e1000e \
	vmxnet3 configfs veth bridge 8021q macvlan \
	>"$order" <<'PY'
import os, sys
deps = {}
for line in open(sys.argv[1]):
    mod, _, rest = line.partition(":")
    deps[mod] = rest.split()
by_name = {os.path.basename(m)[:-3]: m for m in deps}
out = []
def visit(m):
    for d in reversed(deps[m]):
        visit(d)
    if m not in out:
        out.append(m)
for name in sys.argv[2:]:
    visit(by_name[name])
print("\n".join(out))
PY

STOCK_KDIR=$kdir STOCK_ORDER=$order STOCK_MOD=$mod \
	bash "$top/qemu/mkinitramfs.sh" "$cache" stock
